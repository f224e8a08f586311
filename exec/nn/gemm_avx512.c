/* gemm_avx512.c - the executor's own blocked SGEMM on AVX-512 (kern.h,
 * exec_kern_gemm; when it is used and how fast: docs/executor-sgemm.md).
 *
 * Shape of the computation: C (M, N) = beta C + a b, with a(i, k) read in
 * place through two strides (rows of the activations, or a transposed
 * gradient) and b packed into panels of 32 columns, k-major, so one k step
 * of a panel is two aligned 64-byte loads.  The micro-kernel holds a tile of
 * up to 14 rows x 32 columns in 28 zmm accumulators; per k it loads the two
 * panel vectors, broadcasts 14 values of a and issues 28 FMAs, so the two
 * FMA pipes, not the two load ports, set the pace.
 *
 * Blocking: K in blocks of 128 (a panel, 16 KB, and the tile's rows of a,
 * 8 KB, stay in L1 together), N in blocks whose packed panels fit in half
 * of L2, M in blocks whose rows of a fit in a quarter of it; per panel
 * every row tile of the M block runs.  a is never packed: the executor's
 * a operands are used by few panels, and packing them (A^T too, row by
 * row into aligned 16-float rows) measured slower than broadcasting from
 * them in place (61-64% of the FMA peak against 69-73% on the ViT's weight
 * gradients).  Weight gradients with at most 64 rows (of C, or of C^T when
 * that pads fewer panel columns or C has more rows) skip the blocking:
 * each tile streams through K, in chunks that fit in L2 (run_stream).
 *
 * A x W^T (the linear forward) with fewer rows than columns runs
 * transposed, C^T = W X^T: then X (the small operand) is what gets packed
 * (transposed, 16 x 16 blocks in registers) and W is read in place; the
 * tile is transposed back on its store.  Other shapes pack B by copying
 * rows (A B, A^T B) or transposing (A B^T).
 *
 * Every sum runs in a fixed order (k ascending within a block, blocks
 * ascending) that depends on the shape only: results are reproducible.
 */
#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "avx512.h"
#include "kern.h"
#include "tensor.h"

#if KERN_X86

#define MR 14            /* tile rows: 28 accumulators + 2 panel vectors + a broadcast */
#define KC 128           /* K block of the normal orientation: a panel (16 KB) and a tile of a (8 KB) stay in L1 */
#define KC_T 2048        /* K block of the transposed one (its store costs a transpose) */
#define PACK_BYTES (512 * 1024) /* packed panels per N block: half of this core's L2 */

#include "kern_tile.h"

/* ------------------------------------------------------------------------ */
/* per-thread packing buffer (freed when the thread ends)                    */

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static _Thread_local float *buf;
static _Thread_local size_t buf_cap;

static void buf_free(void *p) { free(p); }
static void buf_key_init(void) { (void)pthread_key_create(&buf_key, buf_free); }

static float *pack_buf(size_t floats)
{
    if (floats <= buf_cap) return buf;
    pthread_once(&buf_once, buf_key_init);
    free(buf);
    buf = exec_falloc((int64_t)floats);
    buf_cap = floats;
    (void)pthread_setspecific(buf_key, buf);
    return buf;
}

/* micro-kernel                                                              */

/* acc[2i + h] = init + sum over k < kc of a(i, k) b(k, 16h..16h+15),
 * i < mr, with a(i, k) = a[i rs + k cs]; b(k, j) = bp[k bs + j] (a packed
 * panel, bs = NR, or B's rows read in place); init the
 * accumulators' start (zero, or the bias).  mr is a constant in each
 * instance (the loops unroll); cs == 1 (rows read in place) and rs == 1
 * (packed a: the row offsets become immediates) are made constants too. */
KERN_INLINE void tile(const int mr, const int unit_cs, const int unit_rs, int kc, const float *a,
                      int64_t rs, int64_t cs, const float *bp, int64_t bs, __m512 *acc)
{
    if (unit_cs) cs = 1;
    if (unit_rs) rs = 1;
    for (int k = 0; k < kc; k++, a += cs, bp += bs) tile_kstep(mr, a, rs, bp, acc);
}


/* One tile: its accumulators start at zero or the bias (per column j, or
 * per row i when the tile is stored transposed), run the k loop, and are
 * stored.  The next tile's rows of C are prefetched meanwhile (next may be
 * NULL). */
typedef struct tile_args {
    int kc, nj, add, trans;
    int64_t bs;         /* b's row stride: NR when packed */
    const float *a;
    int64_t rs, cs;
    const float *bp;
    float *c;
    int64_t ldc;
    const float *bias;  /* this tile's first bias value, or NULL */
    const float *next;  /* the next tile's C, or NULL */
} tile_args;

#define TILE_FN(R)                                                                          \
    KERN static void tile_##R(const tile_args *t)                                           \
    {                                                                                       \
        __m512 acc[2 * (R)];                                                                \
        if (!t->bias) {                                                                     \
            for (int i = 0; i < 2 * (R); i++) acc[i] = _mm512_setzero_ps();                 \
        } else if (t->trans) {                                                              \
            for (int i = 0; i < (R); i++) acc[2 * i] = acc[2 * i + 1] = _mm512_set1_ps(t->bias[i]); \
        } else {                                                                            \
            const __m512 b0 = _mm512_maskz_loadu_ps(lanes(t->nj), t->bias);                 \
            const __m512 b1 = _mm512_maskz_loadu_ps(lanes(t->nj - 16), t->bias + 16);       \
            for (int i = 0; i < (R); i++) { acc[2 * i] = b0; acc[2 * i + 1] = b1; }         \
        }                                                                                   \
        if (t->next) {                                                                      \
            /* each row of the next tile: up to 32 floats (14 when stored   \
             * transposed), so its first and last element cover its lines */ \
            const int64_t nl = t->trans ? t->nj : (R), last = t->trans ? (R) - 1 : NR - 1;  \
            for (int64_t i = 0; i < nl; i++) {                                              \
                _mm_prefetch((const char *)(t->next + i * t->ldc), _MM_HINT_T0);            \
                _mm_prefetch((const char *)(t->next + i * t->ldc + last), _MM_HINT_T0);     \
            }                                                                               \
        }                                                                                   \
        if (t->cs == 1) tile((R), 1, 0, t->kc, t->a, t->rs, 1, t->bp, t->bs, acc);          \
        else if (t->rs == 1) tile((R), 0, 1, t->kc, t->a, 1, t->cs, t->bp, t->bs, acc);     \
        else tile((R), 0, 0, t->kc, t->a, t->rs, t->cs, t->bp, t->bs, acc);                 \
        if (t->trans) store_t((R), acc, t->c, t->ldc, t->nj, t->add);                       \
        else store((R), acc, t->c, t->ldc, t->nj, t->add);                                 \
    }
TILE_FN(1) TILE_FN(2) TILE_FN(3) TILE_FN(4) TILE_FN(5) TILE_FN(6) TILE_FN(7)
TILE_FN(8) TILE_FN(9) TILE_FN(10) TILE_FN(11) TILE_FN(12) TILE_FN(13) TILE_FN(14)

typedef void (*tile_fn)(const tile_args *);
static const tile_fn tiles[MR + 1] = {NULL,     tile_1,  tile_2,  tile_3,  tile_4,
                                      tile_5,   tile_6,  tile_7,  tile_8,  tile_9,
                                      tile_10,  tile_11, tile_12, tile_13, tile_14};

/* ------------------------------------------------------------------------ */
/* driver                                                                    */

typedef struct operands {
    const float *a;
    int64_t rs, cs;   /* a(i, k) = a[i rs + k cs] */
    const float *b;
    int64_t ldb;
    int b_trans;      /* 0: b(k, j) = b[k ldb + j]; 1: b[j ldb + k] */
    float *c;
    int64_t ldc;
    int c_trans;      /* 0: C(i, j) at c[i ldc + j]; 1: at c[j ldc + i] */
    const float *bias; /* added per column j (per row i when c_trans), or NULL */
} operands;

/* Rows of C in tiles of at most MR, sized evenly (128 rows: 8 x 13 + 2 x 12
 * rather than 9 x 14 + 2: a 2-row tile runs at the load ports' pace). */
static int tile_rows(int M, int i0)
{
    const int n = (M + MR - 1) / MR, base = M / n, extra = M % n;
    /* the first `extra` tiles take base + 1 rows, the others base */
    return i0 < extra * (base + 1) ? base + 1 : base;
}

/* A^T B (a weight gradient: K = the batch's rows) with at most
 * STREAM_MAX_M rows of C: no packing; each tile streams its strip of A^T
 * (mr adjacent values per k) and of B (32 per k) through a chunk of K and
 * touches C once per chunk.  The chunk is all of K when both operands fit
 * in STREAM_BYTES (then each element is one FMA chain over K, added to C
 * once); longer K runs in chunks that fit, outer, so that every row tile
 * and panel of a chunk find its strips in L2 rather than L3 (the ViT's
 * 4096-row weight gradients).  On the ViT's 64-output weight gradients
 * this ran 71-83% of the FMA peak against 69-71% blocked (Intel); with
 * more rows B is re-streamed per row tile.  Only a ragged last panel is
 * packed.  c_trans: the caller swapped the operands (C^T = B^T A, to fill
 * the 32-column panels), and tiles are stored transposed. */
#define STREAM_MAX_M 64
#define STREAM_BYTES (1024 * 1024)
static int stream_shape(int M, int K, const operands *o)
{
    return o->rs == 1 && o->cs != 1 && !o->b_trans && M <= STREAM_MAX_M && K > 0;
}

KERN static void run_stream(int M, int N, int K, const operands *o, int beta)
{
    const int64_t per_k = (o->cs + o->ldb) * (int64_t)sizeof(float);
    int kcmax = K;
    if ((double)K * (double)per_k > STREAM_BYTES) {
        kcmax = (int)(STREAM_BYTES / per_k) / 16 * 16;
        if (kcmax < KC) kcmax = KC;
    }
    const int ragged = N % NR;
    float *bp = ragged ? pack_buf((size_t)NR * (K < kcmax ? K : kcmax)) : NULL;
    for (int k0 = 0; k0 < K; k0 += kcmax) {
        const int kc = K - k0 < kcmax ? K - k0 : kcmax;
        const float *bias = k0 == 0 ? o->bias : NULL;
        if (bp) pack_rows(bp, o->b + (int64_t)k0 * o->ldb + N / NR * NR, o->ldb, kc, ragged);
        for (int jp = 0; jp < N; jp += NR) {
            const int w = N - jp < NR ? N - jp : NR;
            tile_args t = {kc, w, beta || k0 > 0, o->c_trans, w < NR ? NR : o->ldb, NULL, 1, o->cs,
                           w < NR ? bp : o->b + (int64_t)k0 * o->ldb + jp, NULL, o->ldc, NULL, NULL};
            for (int i0 = 0, mr; i0 < M; i0 += mr) {
                mr = tile_rows(M, i0);
                t.a = o->a + i0 + (int64_t)k0 * o->cs;
                t.c = o->c_trans ? o->c + (int64_t)jp * o->ldc + i0 : o->c + (int64_t)i0 * o->ldc + jp;
                t.bias = !bias ? NULL : o->c_trans ? bias + i0 : bias + jp;
                t.next = i0 + mr >= M      ? NULL
                         : o->c_trans ? t.c + mr
                                      : t.c + (int64_t)mr * o->ldc;
                tiles[mr](&t);
            }
        }
    }
}

/* Loop order within a K block: N blocks of packed panels (L2); M blocks
 * whose rows of a fit in a quarter of L2; per panel (L1) every row tile
 * of the M block, whose rows of a stream from L1 / L2 (a tile reads 14
 * lines of a per 16 k steps against 32 of the panel, so the panel is what
 * stays put). */
#define A_BLOCK_BYTES (256 * 1024)
KERN static void run(int M, int N, int K, const operands *o, int beta)
{
    if (stream_shape(M, K, o)) {
        run_stream(M, N, K, o, beta);
        return;
    }
    const int kcmax = o->c_trans ? KC_T : KC;
    for (int k0 = 0; k0 < K || k0 == 0; k0 += kcmax) {
        const int kc = K - k0 < kcmax ? K - k0 : kcmax, kc1 = kc > 0 ? kc : 1;
        const int add = beta || k0 > 0;
        const float *bias = k0 == 0 ? o->bias : NULL;
        int nc = (int)(PACK_BYTES / ((size_t)kc1 * sizeof(float))) / NR * NR;
        if (nc < NR) nc = NR;
        /* rows of C per M block: whole tiles, a's rows within A_BLOCK_BYTES */
        int tiles_blk = (int)(A_BLOCK_BYTES / ((size_t)MR * kc1 * sizeof(float)));
        if (tiles_blk < 1) tiles_blk = 1;
        const size_t b_floats = (size_t)(nc < N ? nc : (N + NR - 1) / NR * NR) * kc1;
        float *bp = pack_buf(b_floats);
        for (int j0 = 0; j0 < N; j0 += nc) {
            const int nj = N - j0 < nc ? N - j0 : nc;
            if (kc > 0) {
                if (o->b_trans) pack_trans(bp, o->b + (int64_t)j0 * o->ldb + k0, o->ldb, kc, nj);
                else pack_rows(bp, o->b + (int64_t)k0 * o->ldb + j0, o->ldb, kc, nj);
            }
            for (int i_blk = 0; i_blk < M;) {
                /* rows [i_blk, i_end) */
                int i_end = i_blk;
                for (int q = 0; q < tiles_blk && i_end < M; q++) i_end += tile_rows(M, i_end);
                for (int jp = 0; jp < nj; jp += NR) {
                    const int64_t j = j0 + jp;
                    tile_args t = {kc, nj - jp < NR ? nj - jp : NR, add, o->c_trans, NR, NULL, o->rs,
                                   o->cs, bp + (int64_t)jp * kc, NULL, o->ldc, NULL, NULL};
                    for (int i0 = i_blk, mr; i0 < i_end; i0 += mr) {
                        mr = tile_rows(M, i0);
                        t.a = o->a + (int64_t)i0 * o->rs + (int64_t)k0 * o->cs;
                        t.c = o->c_trans ? o->c + j * o->ldc + i0 : o->c + (int64_t)i0 * o->ldc + j;
                        t.bias = !bias ? NULL : o->c_trans ? bias + i0 : bias + j;
                        t.next = i0 + mr >= i_end ? NULL
                                 : o->c_trans     ? t.c + mr
                                                  : t.c + (int64_t)mr * o->ldc;
                        tiles[mr](&t);
                    }
                }
                i_blk = i_end;
            }
        }
        if (K == 0) break;
    }
}

/* columns of padding in the panels of n columns */
static int pad32(int n) { return (n + NR - 1) / NR * NR - n; }

void exec_kern_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda,
                    const float *B, int ldb, const float *bias, int beta, float *C, int ldc)
{
    assert(M >= 0 && N >= 0 && K >= 0);
    assert(ldc >= (N > 1 ? N : 1));
    assert(lda >= ((ta ? M : K) > 1 ? (ta ? M : K) : 1));
    assert(ldb >= ((tb ? K : N) > 1 ? (tb ? K : N) : 1));
    assert(beta == 0 || beta == 1);
    if (M == 0 || N == 0) return;
    operands o = {A, ta ? 1 : lda, ta ? lda : 1, B, ldb, tb, C, ldc, 0, bias};
    if (ta && !tb && (pad32(M) < pad32(N) || M > STREAM_MAX_M) && N <= STREAM_MAX_M) {
        /* C^T (N, M) = B^T A, so that it streams (run_stream), when that
         * pads fewer panel columns (the patch embedding's weight gradient,
         * 64 x 49: panels of 64 columns, not 49 in 64) or C has too many
         * rows to stream but few columns (the ViT's qkv and mlp fc1, 192
         * and 128 x 64: 86-88% of the FMA peak against 78-80% blocked, on
         * Zen 5); each element the same FMA chain over k as unswapped */
        o = (operands){B, 1, ldb, A, lda, 0, C, ldc, 1, bias};
        run(N, M, K, &o, beta);
        return;
    }
    if (!ta && tb && M < N) {
        /* C^T (N, M) = B (N, K) A^T: pack the smaller A, read B's rows in place */
        o = (operands){B, ldb, 1, A, lda, 1, C, ldc, 1, bias};
        run(N, M, K, &o, beta);
        return;
    }
    run(M, N, K, &o, beta);
}

/* db[j] += sum over rows r of d[r cols + j], rows in order from db[j]: the
 * portable loop's additions in its order (the same bits), on 16 lanes and
 * up to 8 vectors of columns at a time */
KERN void exec_kern_colsum_add(float *db, const float *d, int rows, int cols)
{
    for (int j0 = 0; j0 < cols; j0 += 128) {
        const int nv = (cols - j0 + 15) / 16 < 8 ? (cols - j0 + 15) / 16 : 8;
        __m512 acc[8];
        __mmask16 m[8];
        for (int v = 0; v < 8; v++) {
            m[v] = lanes(cols - j0 - 16 * v);
            acc[v] = v < nv ? _mm512_maskz_loadu_ps(m[v], db + j0 + 16 * v) : _mm512_setzero_ps();
        }
        const float *p = d + j0;
        for (int r = 0; r < rows; r++, p += cols)
            for (int v = 0; v < nv; v++)
                acc[v] = _mm512_add_ps(acc[v], _mm512_maskz_loadu_ps(m[v], p + 16 * v));
        for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(db + j0 + 16 * v, m[v], acc[v]);
    }
}

#else /* no AVX-512 build: exec_kern_avx512() is 0 and nothing calls this */

void exec_kern_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda,
                    const float *B, int ldb, const float *bias, int beta, float *C, int ldc)
{
    (void)bias;
    (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)A; (void)lda;
    (void)B; (void)ldb; (void)beta; (void)C; (void)ldc;
    abort();
}

void exec_kern_colsum_add(float *db, const float *d, int rows, int cols)
{
    (void)db; (void)d; (void)rows; (void)cols;
    abort();
}

#endif
