# soak and fault suite (tests/soak/soak): `make check` runs its 2-minute version, a person
# runs it for an hour (README, "Development"). A Python 3 script of the standard library
# alone, driving the built tomolived and tomolive; SKIP without the interpreter.
TESTS += tests/soak/check_soak.sh
EXTRA_DIST += tests/soak/soak tests/soak/check_soak.sh
