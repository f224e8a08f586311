/* escape.h - names, and the one escaping function per output language
 * (prefix esc_).
 *
 * Names (of models, layers, clusters, nodes, devices, device types, trace
 * rows) come from files other people wrote, and reach gnuplot scripts,
 * Python exports, CSV, JSON and the terminal.  Two layers keep them inert
 * (docs/testing.md, "Threat model: names"):
 *
 *  1. every loader accepts a name only when esc_name_problem() finds nothing
 *     wrong with it: 1 to ESC_NAME_MAX bytes of ASCII letters, digits, space
 *     and  _ - . + : / @ # % ( ) [ ] =  starting with a letter, a digit or _,
 *     not ending in a space.  None of these characters means anything
 *     inside a quoted string of any language below;
 *  2. every sink still writes a name (and every other text: titles, paths)
 *     through the escaper of its language, so a string that never went
 *     through a loader (a command-line --title, an output path) is inert too.
 *
 * Shell: there is none; cleave starts programs with argv arrays
 * (posix_spawn, base/spawn.h), never system() or popen().
 *
 * Each esc_* returns a new NUL-terminated string (caller frees).
 */
#ifndef CL_ESCAPE_H
#define CL_ESCAPE_H

#include <stddef.h>

/* Longest name in bytes (the loaders' buffers hold ESC_NAME_MAX + 1). */
#define ESC_NAME_MAX 63

/* The characters a name may hold besides ASCII letters and digits. */
#define ESC_NAME_PUNCT "_-.+:/@#%()[]= "

/* NULL when s is a valid name, else what is wrong with it, e.g.
 * "holds a backtick (`) at byte 3", for an error message (static storage of
 * this thread: use it before the next call). */
const char *esc_name_problem(const char *s);

/* Make a derived name (from a file name, say) valid in place: characters
 * outside the set become '_', a bad first character is replaced by '_',
 * trailing spaces are dropped; an empty result becomes "_". */
void esc_name_fix(char *s);

/* A gnuplot string literal the script never evaluates: in single quotes
 * (no backslash escapes, no backtick command substitution); a ' as '."'".'
 * and a newline as '."\n".' (concatenations with constant double-quoted
 * strings: gnuplot's '' misparses at a literal's start), any other control
 * byte as '?'.  Passed to gnuplot only as the value of a variable. */
char *esc_gnuplot(const char *s);

/* A Python 3 str literal in double quotes: \\ \" \n \r \t, every other byte
 * outside printable ASCII as \xNN.  Also safe inside a # comment (no line
 * break survives). */
char *esc_python(const char *s);

/* One CSV field (RFC 4180): quoted when it holds , " CR or LF, or starts or
 * ends with a space; " doubled; CR and LF become spaces (one record a line). */
char *esc_csv(const char *s);

/* A JSON string literal: \" \\ and every byte below 0x20 as \u00XX.  (cJSON
 * does the same for the documents built with it; this is for the writers
 * that stream JSON, such as Chrome traces.) */
char *esc_json(const char *s);

/* Text for a terminal: every control byte (below 0x20, 0x7F, and the C1
 * controls U+0080..U+009F in UTF-8) as \xNN, so a
 * file cannot move the cursor, change colours or the window title, or
 * break a one-line message into several.  Other bytes pass unchanged. */
char *esc_term(const char *s);

#endif
