/* escape.c - names and output escaping (see escape.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "status.h"

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr(ESC_NAME_PUNCT, c) != NULL);
}

static int name_first(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "a backtick (`)", "control character 0x1b", "byte 0xc3 (not ASCII)" */
static void describe(char *buf, size_t cap, unsigned char c)
{
    static const struct { char c; const char *what; } known[] = {
        {'`', "a backtick (`)"}, {'$', "a dollar sign ($)"}, {'"', "a double quote (\")"},
        {'\'', "a single quote (')"}, {'\\', "a backslash (\\)"}, {';', "a semicolon (;)"},
        {',', "a comma (,)"}, {'\n', "a line break"}, {'\t', "a tab"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if ((unsigned char)known[i].c == c) {
            snprintf(buf, cap, "%s", known[i].what);
            return;
        }
    if (c < 0x20 || c == 0x7f) snprintf(buf, cap, "control character 0x%02x", c);
    else if (c >= 0x80) snprintf(buf, cap, "byte 0x%02x (names are ASCII)", c);
    else snprintf(buf, cap, "'%c'", c);
}

const char *esc_name_problem(const char *s)
{
    static _Thread_local char msg[160];
    size_t n = strlen(s);
    if (n == 0) return "is empty";
    if (n > ESC_NAME_MAX) {
        snprintf(msg, sizeof msg, "is %zu bytes long, more than %d", n, ESC_NAME_MAX);
        return msg;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (name_char(c) && (i > 0 || name_first(c))) continue;
        char what[64];
        describe(what, sizeof what, c);
        if (i == 0 && name_char(c)) snprintf(msg, sizeof msg, "starts with %s", what);
        else snprintf(msg, sizeof msg, "holds %s at byte %zu", what, i + 1);
        return msg;
    }
    if (s[n - 1] == ' ') return "ends with a space";
    return NULL;
}

void esc_name_fix(char *s)
{
    size_t n = strlen(s);
    if (n > ESC_NAME_MAX) s[n = ESC_NAME_MAX] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i])) s[i] = '_';
    if (n && !name_first((unsigned char)s[0])) s[0] = '_';
    while (n && s[n - 1] == ' ') s[--n] = '\0';
    if (!n) strcpy(s, "_"); /* the caller's buffer holds at least 2 bytes */
}

/* A growing string. */
typedef struct sb {
    char *s;
    size_t n, cap;
} sb;

static void sb_put(sb *b, const char *t, size_t len)
{
    if (b->n + len + 1 > b->cap) {
        b->cap = 2 * (b->n + len + 1) + 16;
        b->s = cl_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, t, len);
    b->n += len;
    b->s[b->n] = '\0';
}

static void sb_puts(sb *b, const char *t) { sb_put(b, t, strlen(t)); }
static void sb_putc(sb *b, char c) { sb_put(b, &c, 1); }

static void sb_hex(sb *b, const char *prefix, unsigned char c)
{
    char h[8];
    snprintf(h, sizeof h, "%s%02x", prefix, c);
    sb_puts(b, h);
}

static char *sb_done(sb *b)
{
    if (!b->s) sb_put(b, "", 0);
    return b->s;
}

char *esc_gnuplot(const char *s)
{
    sb b = {0};
    sb_putc(&b, '\'');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'') sb_puts(&b, "'.\"'\".'"); /* '' fails at a literal's start */
        else if (c == '\n') sb_puts(&b, "'.\"\\n\".'");
        else if (c < 0x20 || c == 0x7f) sb_putc(&b, '?');
        else sb_putc(&b, (char)c);
    }
    sb_putc(&b, '\'');
    return sb_done(&b);
}

char *esc_python(const char *s)
{
    sb b = {0};
    sb_putc(&b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { sb_putc(&b, '\\'); sb_putc(&b, (char)c); }
        else if (c == '\n') sb_puts(&b, "\\n");
        else if (c == '\r') sb_puts(&b, "\\r");
        else if (c == '\t') sb_puts(&b, "\\t");
        else if (c < 0x20 || c >= 0x7f) sb_hex(&b, "\\x", c);
        else sb_putc(&b, (char)c);
    }
    sb_putc(&b, '"');
    return sb_done(&b);
}

char *esc_csv(const char *s)
{
    sb b = {0};
    size_t n = strlen(s);
    int quote = strpbrk(s, ",\"\r\n") != NULL || (n && (s[0] == ' ' || s[n - 1] == ' '));
    if (quote) sb_putc(&b, '"');
    for (; *s; s++) {
        if (*s == '"') sb_puts(&b, "\"\"");
        else sb_putc(&b, *s == '\n' || *s == '\r' ? ' ' : *s);
    }
    if (quote) sb_putc(&b, '"');
    return sb_done(&b);
}

char *esc_json(const char *s)
{
    sb b = {0};
    sb_putc(&b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { sb_putc(&b, '\\'); sb_putc(&b, (char)c); }
        else if (c < 0x20) sb_hex(&b, "\\u00", c);
        else sb_putc(&b, (char)c);
    }
    sb_putc(&b, '"');
    return sb_done(&b);
}

char *esc_term(const char *s)
{
    sb b = {0};
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        unsigned char d = (unsigned char)s[1];
        if (c == 0xc2 && d >= 0x80 && d <= 0x9f) { /* a C1 control in UTF-8 (0x9b: CSI) */
            sb_hex(&b, "\\x", c);
            sb_hex(&b, "\\x", d);
            s++;
        } else if (c < 0x20 || c == 0x7f) sb_hex(&b, "\\x", c);
        else sb_putc(&b, (char)c);
    }
    return sb_done(&b);
}
