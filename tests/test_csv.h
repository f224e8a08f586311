/* test_csv.h - a small CSV reader for the suites that check the CSV files
 * of cleave sweep and cleave compare (RFC 4180 quoting: "a, b" and "" for a
 * quote), and helpers to look at an output folder. */
#ifndef CL_TEST_CSV_H
#define CL_TEST_CSV_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/fileio.h"

typedef struct test_csv {
    int n_rows, n_cols;     /* rows after the header; columns of the header */
    char **cell;            /* (n_rows + 1) x n_cols, row 0 is the header  */
    int ragged;             /* some row had another column count            */
} test_csv;

/* Parse a CSV file; 0 on success (a ragged file still parses, with ragged set). */
static inline int test_csv_read(const char *path, test_csv *c)
{
    memset(c, 0, sizeof *c);
    char *text = NULL;
    cl_err e = {0};
    if (cl_read_file(path, 1 << 24, &text, NULL, &e)) return -1;
    int cap = 0, row = 0, col = 0, cols0 = -1;
    char *p = text;
    char field[2048];
    while (*p) {
        size_t n = 0;
        if (*p == '"') {
            for (p++; *p; p++) {
                if (*p == '"' && p[1] == '"') { if (n + 1 < sizeof field) field[n++] = '"'; p++; }
                else if (*p == '"') { p++; break; }
                else if (n + 1 < sizeof field) field[n++] = *p;
            }
        } else {
            for (; *p && *p != ',' && *p != '\n'; p++)
                if (n + 1 < sizeof field) field[n++] = *p;
        }
        field[n] = '\0';
        if (row == 0) {
            c->cell = realloc(c->cell, (size_t)(col + 1) * sizeof *c->cell);
            c->cell[col] = strdup(field);
        } else if (col < c->n_cols) {
            if (row >= cap) {
                cap = cap ? 2 * cap : 16;
                c->cell = realloc(c->cell, (size_t)(cap + 1) * (size_t)c->n_cols * sizeof *c->cell);
            }
            c->cell[row * c->n_cols + col] = strdup(field);
        }
        col++;
        if (*p == ',') { p++; continue; }
        /* end of a row */
        if (row == 0) {
            c->n_cols = col;
            cap = 0;
        } else if (col != c->n_cols) {
            c->ragged = 1;
            for (int k = col; k < c->n_cols; k++) c->cell[row * c->n_cols + k] = strdup("");
        }
        if (cols0 < 0) cols0 = col;
        row++;
        col = 0;
        if (*p == '\n') p++;
    }
    c->n_rows = row > 0 ? row - 1 : 0;
    free(text);
    return 0;
}

/* Cell of data row r (0-based) in the column named `name`; NULL if none. */
static inline const char *test_csv_get(const test_csv *c, int r, const char *name)
{
    for (int k = 0; k < c->n_cols; k++)
        if (!strcmp(c->cell[k], name)) return c->cell[(r + 1) * c->n_cols + k];
    return NULL;
}

static inline double test_csv_num(const test_csv *c, int r, const char *name)
{
    const char *s = test_csv_get(c, r, name);
    return s && *s ? strtod(s, NULL) : NAN;
}

static inline void test_csv_free(test_csv *c)
{
    if (c->cell)
        for (int i = 0; i < (c->n_rows + 1) * c->n_cols; i++) free(c->cell[i]);
    free(c->cell);
    memset(c, 0, sizeof *c);
}

/* Files in a folder (not . or ..); names of those with "tmp" in them go to
 * *tmp_seen (cleave's temporaries are "<name>.tmp.*"). */
static inline int test_dir_count(const char *dir, int *tmp_seen)
{
    DIR *d = opendir(dir);
    int n = 0;
    *tmp_seen = 0;
    if (!d) return -1;
    for (struct dirent *x; (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, "..")) continue;
        n++;
        if (strstr(x->d_name, "tmp")) (*tmp_seen)++;
    }
    closedir(d);
    return n;
}

/* What an interrupted sweep or compare leaves (the caller checks its
 * message): a CSV of n_rows whole rows, none cut short, and n_files files
 * in dir, none a temporary. */
static inline void test_check_interrupted(const char *csv, int n_rows, const char *dir, int n_files)
{
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    CU_ASSERT_EQUAL(c.n_rows, n_rows);
    CU_ASSERT_FALSE(c.ragged);
    test_csv_free(&c);
    int tmp = 0;
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), n_files);
    CU_ASSERT_EQUAL(tmp, 0);
}

/* Remove a folder and the files in it (one level). */
static inline void test_rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char p[1024];
    for (struct dirent *x; (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, x->d_name);
        remove(p);
    }
    closedir(d);
    rmdir(dir);
}

#endif
