/* progress.c - progress bar on a terminal and the SIGINT flag (progress.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "measure.h"

static volatile sig_atomic_t interrupted;
static int handler_installed;
static struct sigaction saved_action;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1; /* SA_RESETHAND: the next Ctrl-C takes the default action */
}

void prog_catch_sigint(void)
{
    interrupted = 0;
    if (handler_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    if (sigaction(SIGINT, &sa, &saved_action) == 0) handler_installed = 1;
}

void prog_release_sigint(void)
{
    if (!handler_installed) return;
    sigaction(SIGINT, &saved_action, NULL);
    handler_installed = 0;
}

int prog_interrupted(void)
{
    return interrupted != 0;
}

static int term_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

/* "[#######.......]  7/40  sweep  8 devices fbp  ~12 s left", cut to the
 * terminal's width so it never wraps (a wrapped line cannot be redrawn). */
static void draw(prog *p, const char *label)
{
    int width = term_width() - 1;
    char tail[160], eta[32] = "";
    double el = cl_now_s() - p->t0_s;
    if (p->done > 0 && p->done < p->total && el > 1.0)
        snprintf(eta, sizeof eta, "  ~%.0f s left", el / p->done * (p->total - p->done));
    snprintf(tail, sizeof tail, " %d/%d  %s%s%s%s", p->done, p->total, p->what, label ? "  " : "",
             label ? label : "", eta);
    int bar = width - (int)strlen(tail) - 2;
    if (bar > 40) bar = 40;
    char line[512];
    int n = 0;
    line[n++] = '\r';
    if (bar >= 5) {
        int full = p->total > 0 ? (int)((long)bar * p->done / p->total) : 0;
        line[n++] = '[';
        for (int i = 0; i < bar; i++) line[n++] = i < full ? '#' : '.';
        line[n++] = ']';
    }
    snprintf(line + n, sizeof line - (size_t)n, "%s", tail);
    if ((int)strlen(line) > width + 1) line[width + 1] = '\0';
    fputs(line, stderr);
    fputs("\033[K", stderr); /* clear what a longer previous line left */
    fflush(stderr);
    p->drawn = 1;
    p->last_s = cl_now_s();
}

void prog_begin(prog *p, const char *what, int total)
{
    memset(p, 0, sizeof *p);
    snprintf(p->what, sizeof p->what, "%s", what);
    p->total = total;
    p->tty = isatty(STDERR_FILENO); /* bars only on a terminal */
    p->t0_s = cl_now_s();
    const char *hook = getenv("CLEAVE_TEST_INTERRUPT_AFTER");
    if (hook && *hook) p->interrupt_after = atoi(hook);
    if (p->tty) draw(p, NULL);
}

void prog_step(prog *p, const char *label)
{
    p->done++;
    if (p->tty && (p->done == p->total || cl_now_s() - p->last_s >= 0.1)) draw(p, label);
    if (p->interrupt_after > 0 && p->done == p->interrupt_after) raise(SIGINT);
}

void prog_end(prog *p)
{
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}
