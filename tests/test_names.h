/* test_names.h - the hostile strings of the names suites (test_names.c,
 * test_names_cli.c). */
#ifndef CL_TEST_NAMES_H
#define CL_TEST_NAMES_H

#include <stdio.h>
#include <string.h>

#include "base/status.h"

/* Strings every sink must survive; %M is replaced by a marker path that a
 * shell or gnuplot command substitution would create. */
static const char *const hostile[] __attribute__((unused)) = {
    "c`touch %M`",
    "c$(touch %M)",
    "it's \"quoted\" \\ back; semi",
    "a\nEOD\nprint `touch %M`\n#",
    "esc\x1b[2J\x1b]0;title\x07",
    "'`touch %M`'",
    "\"; system(\"touch %M\") #",
    "m\nimport os; os.system(\"touch %M\")\n#",
};
#define N_HOSTILE (sizeof hostile / sizeof hostile[0])

/* hostile[i] with %M replaced by marker. */
static inline char *with_marker(const char *s, const char *marker)
{
    size_t cap = strlen(s) + 8 * strlen(marker) + 1, n = 0;
    char *out = cl_malloc(cap);
    for (; *s; s++) {
        if (s[0] == '%' && s[1] == 'M') {
            n += (size_t)snprintf(out + n, cap - n, "%s", marker);
            s++;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return out;
}

#endif
