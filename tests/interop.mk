# interop tests
