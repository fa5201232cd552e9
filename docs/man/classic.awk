# Puts a family page that doxygen made from zkr.h (man3) into the classic
# order of a reference page: NAME, SYNOPSIS, DESCRIPTION (the family's
# text), the reference doxygen writes (MACROS, TYPES, ENUMERATIONS,
# FUNCTIONS), then RETURN VALUE, ERRORS, EXAMPLE, SEE ALSO, AUTHOR.
#
# zkr.h names the classic sections in a family's text with \par RETURN
# VALUE, \par ERRORS, \par EXAMPLE and \sa, which doxygen renders as
#   .PP
#   \fBRETURN VALUE\fP
#   .RS 4
#   ...
#   .RE
# Each such block leaves the description for a section of its own, its
# indentation (the .RS 4 after the title and the last .RE) dropped.
# Usage: awk -f classic.awk PAGE > NEW
function rename(h) {
    if (h ~ /"Detailed Description"/) return ".SH DESCRIPTION"
    if (h ~ /"Macro Definition Documentation"/) return ".SH MACROS"
    if (h ~ /"Typedef Documentation"/) return ".SH TYPES"
    if (h ~ /"Enumeration Type Documentation"/) return ".SH ENUMERATIONS"
    if (h ~ /"Function Documentation"/) return ".SH FUNCTIONS"
    if (h ~ /"Field Documentation"/) return ".SH FIELDS"
    if (h ~ /"Author"/) return ".SH AUTHOR"
    return h
}
# The block title a line names (\fBTITLE\fP), or "".
function title(l) {
    if (l == "\\fBRETURN VALUE\\fP") return "RETURN VALUE"
    if (l == "\\fBERRORS\\fP") return "ERRORS"
    if (l == "\\fBEXAMPLE\\fP") return "EXAMPLE"
    if (l == "\\fBSee also\\fP") return "SEE ALSO"
    return ""
}
{ line[NR] = $0 }
END {
    nsec = 0
    for (i = 1; i <= NR; i++) {
        if (line[i] ~ /^\.SH /) {
            nsec++
            head[nsec] = rename(line[i])
            body[nsec] = ""
            indesc = head[nsec] == ".SH DESCRIPTION"
            continue
        }
        if (nsec == 0) {
            print line[i]
            continue
        }
        if (indesc && line[i] == ".PP" &&
            i + 2 <= NR && title(line[i + 1]) != "" && line[i + 2] == ".RS 4") {
            t = title(line[i + 1])
            nsec++
            head[nsec] = ".SH \"" t "\""
            body[nsec] = ""
            block[nsec] = 1
            i += 2
            continue
        }
        body[nsec] = body[nsec] line[i] "\n"
    }
    # A block's own .RE is its last one.
    for (k = 1; k <= nsec; k++) {
        if (!block[k])
            continue
        n = split(body[k], l, "\n")
        last = 0
        for (j = 1; j <= n; j++)
            if (l[j] == ".RE")
                last = j
        b = ""
        for (j = 1; j < n; j++)
            if (j != last)
                b = b l[j] "\n"
        body[k] = b
    }
    order = ".SH NAME|.SH SYNOPSIS|.SH DESCRIPTION|.SH MACROS|.SH TYPES|" \
            ".SH ENUMERATIONS|.SH FUNCTIONS|.SH FIELDS|" \
            ".SH \"RETURN VALUE\"|.SH \"ERRORS\"|.SH \"EXAMPLE\"|" \
            ".SH \"SEE ALSO\"|.SH AUTHOR"
    no = split(order, want, "|")
    for (w = 1; w <= no; w++)
        for (k = 1; k <= nsec; k++)
            if (head[k] == want[w] && !done[k]) {
                printf "%s\n%s", head[k], body[k]
                done[k] = 1
            }
    for (k = 1; k <= nsec; k++) # any section not named above
        if (!done[k])
            printf "%s\n%s", head[k], body[k]
}
