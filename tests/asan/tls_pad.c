/* tls_pad.c - preloaded into an ASan-built MPI rank by tools/asan_tls_check.sh.
 *
 * TLS_PAD_N=n makes n 16-byte allocations before main, so the dynamic TLS
 * blocks Open MPI's components allocate later move n chunks up in ASan's
 * 32-byte size class: the check uses it to place one exactly 16 bytes past a
 * page boundary (see tools/asan_defaults.c).  TLS_PAD_LEAK=1 also leaks 100
 * bytes, which LeakSanitizer must report at the rank's exit. */
#include <stdlib.h>

/* not static: the compiler may not drop allocations that nothing reads */
void *tls_pad_kept[4096];

__attribute__((constructor)) static void tls_pad(void)
{
    const char *s = getenv("TLS_PAD_N");
    int n = s ? atoi(s) : 0;
    for (int i = 0; i < n && i < 4096; i++) tls_pad_kept[i] = malloc(16);
    const char *leak = getenv("TLS_PAD_LEAK");
    if (leak && leak[0] == '1') {
        char *volatile p = malloc(100);
        p[0] = 1;
        p = NULL;
    }
}
