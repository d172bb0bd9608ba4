# conf2man.awk — makes tomolive.conf(5) from its template and the shipped configuration.
#
#   awk -v conf=etc/tomolive.conf -f etc/conf2man.awk etc/tomolive.conf.5.in > tomolive.conf.5
#
# Copies the template, replacing the line "@KEYS@" with one entry per key of conf. conf is
# what tl_settings_write(defaults, with_help) prints (check_config fails when it is not), so
# the page documents exactly the keys of the settings table in daemon/base/settings.c, with their
# help, range, default and reload behaviour, and cannot drift from them. conf's layout:
# "[section]" lines; then per key its help ("# text" lines, the last one the range,
# default and reload note) and the key line itself, "#key = default" or "key = value".

# roff-safe text: backslashes escaped, no control character at the start of a line
function roff(s) {
    gsub(/\\/, "\\e", s)
    if (s ~ /^[.']/)
        s = "\\&" s
    return s
}

function keys(   line, started, n, i, name) {
    started = 0
    n = 0
    while ((getline line < conf) > 0) {
        if (line ~ /^\[[a-z0-9_.-]+\]$/) {
            started = 1
            n = 0
            print ".SS " line
            continue
        }
        if (!started)
            continue                        # the file's own header
        if (line ~ /^# /) {
            help[++n] = substr(line, 3)
            continue
        }
        if (line ~ /^#?[a-z0-9_]+ = /) {
            name = line
            sub(/^#/, "", name)
            sub(/ = .*/, "", name)
            print ".TP"
            print ".B " name
            for (i = 1; i <= n; i++)
                print roff(help[i])
            n = 0
            continue
        }
        if (line != "") {
            print "conf2man.awk: " conf ": unexpected line: " line > "/dev/stderr"
            exit 1
        }
    }
    if (!started) {
        print "conf2man.awk: cannot read the keys of " conf > "/dev/stderr"
        exit 1
    }
    close(conf)
}

$0 == "@KEYS@" { keys(); next }
{ print }
