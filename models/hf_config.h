/* hf_config.h - a Hugging Face config.json as a cleave model (`cleave
 * import config.json`).
 *
 * Reads the architecture of a decoder-only transformer from the config of
 * one of four families (model_type gpt2, gpt_neox, llama, mistral) into a
 * tfm_desc (models/transformer.h), then builds the model file's layers from
 * it (models/tfm_model.h).  Which keys each family reads, their defaults,
 * and what is not modelled: docs/transformer.md, "Importing a Hugging Face
 * config.json".
 *
 * Bad input (not JSON, an unknown model_type, a missing, mistyped or absurd
 * size, sizes that do not divide) fails with CL_EINPUT and one line naming
 * the file and the JSON key, with a hint.
 */
#ifndef CL_HF_CONFIG_H
#define CL_HF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "models/model.h"
#include "models/transformer.h"

struct cJSON;

/* Default sequence length cap: without --seq the sequence is the config's
 * maximum positions, at most this.  8192 is the context LLaMA-3 and
 * Mistral 7B were pretrained with; configs announce far longer windows
 * (Mistral's 32768, LLaMA-3.1's 131072) that pretraining reaches only with
 * context parallelism and fused attention, which cleave does not model. */
#define HF_SEQ_CAP 8192

/* Bounds on the config's sizes (far above any published model; they keep
 * every product the formulas form exact in a double). */
#define HF_MAX_LAYERS 10000
#define HF_MAX_WIDTH ((int64_t)1 << 20)     /* hidden size, heads          */
#define HF_MAX_FFN ((int64_t)1 << 22)       /* MLP inner size              */
#define HF_MAX_POSITIONS ((int64_t)1 << 24) /* max positions, --seq        */
#define HF_MAX_VOCAB ((int64_t)1 << 24)

typedef struct hf_opts {
    int64_t seq;      /* sequence length; 0: the config's, capped at HF_SEQ_CAP */
    int dtype;        /* a model_dtype, or -1: the config's torch_dtype
                       * (float32 when it names none, as transformers loads it) */
    const char *name; /* the model's name; NULL: derived from the path       */
} hf_opts;

/* What was read and which defaults were taken, for the command's notes. */
typedef struct hf_info {
    char model_type[16];     /* "gpt2", "gpt_neox", "llama", "mistral"       */
    const char *pos_key;     /* the key holding the maximum positions        */
    int64_t max_positions;   /* its value                                    */
    int seq_capped;          /* 1: the default sequence was cut to HF_SEQ_CAP */
    int seq_beyond;          /* 1: --seq is longer than the maximum positions
                              * (rotary: allowed, the model was not trained so) */
    int dtype_default;       /* 1: no torch_dtype, float32 taken             */
    int64_t sliding_window;  /* Mistral's window (0: none); not modelled     */
    tfm_desc desc;           /* the transformer the model is built from      */
    model_dtype dtype;
} hf_info;

/* Read the config document `root` (from `file`) into info->desc and the
 * choices above.  CL_OK, or CL_EINPUT naming file and key. */
int hf_config_read(const struct cJSON *root, const char *file, const hf_opts *o,
                   hf_info *info, cl_err *e);

/* Parse text[0..len) (text[len] == '\0') as a config and build the model:
 * embedding, one block per transformer layer, head.  info may be NULL.
 * On failure *m is left empty. */
int hf_import_text(model *m, const char *text, size_t len, const char *file,
                   const hf_opts *o, hf_info *info, cl_err *e);
/* The same from a file (at most JX_MAX_FILE_BYTES). */
int hf_import(model *m, const char *path, const hf_opts *o, hf_info *info, cl_err *e);

/* The model name derived from a path: the file's base name without
 * ".json", or for a file called config.json its folder's name (Hugging
 * Face keeps one config per model folder); characters outside the name set
 * become '_'.  buf holds MODEL_NAME_MAX bytes. */
void hf_name_from_path(const char *path, char *buf, size_t cap);

#endif
