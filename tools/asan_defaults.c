/* asan_defaults.c - AddressSanitizer options compiled into the sanitizer
 * builds of cleave and cleave_tests (make asan), so every process gets them
 * however it is started: by the test runner, by mpirun, or by hand.
 *
 * intercept_tls_get_addr=0.  GCC 12's sanitizer runtime (and LLVM's up to
 * 16) records each dynamic TLS block it sees through __tls_get_addr.  A block
 * whose address is 16 bytes past a page boundary is taken for a glibc 2.19
 * block with a {size, start} header in front, and those two words are read
 * as the block's extent.  Since glibc 2.25 there is no such header: the
 * words belong to the previous heap chunk.  Open MPI's components hold
 * dynamic TLS that ASan's allocator places in its 32-byte size class, and on
 * some machines the block of one rank lands 16 bytes past a page; at exit
 * LeakSanitizer's tracer then scans the garbage extent, dies with SIGSEGV
 * ("Tracer caught signal 11") and the rank exits 1 without a leak report.
 * Not intercepting leaves the dynamic TLS of dlopen'ed libraries unscanned
 * for roots, which can only add reports, never hide a leak; cleave has no
 * dynamic TLS of its own.  tools/asan_tls_check.sh forces the placement and
 * checks both (docs/testing.md, "LeakSanitizer in MPI ranks"). */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
    return "intercept_tls_get_addr=0";
}
#endif
