/* llama2c.h - converts a karpathy/llama2.c checkpoint (.bin, float32) and its tokenizer
 * (.bin) into a llama-architecture GGUF file that the rest of the engine loads.
 *
 * It is an offline converter, not a loader: the engine only ever reads GGUF. Both input
 * files are validated completely before anything is written (every header field, the
 * exact byte count the header implies, every token length), so a truncated or hostile
 * input gives ST_ERR_FORMAT with a message naming the mismatch and no output file.
 * The weights are copied unchanged: llama2.c stores every matrix row-major as [out][in],
 * which is GGUF's ne[0] = in, ne[1] = out, and it rotates adjacent pairs (2i, 2i+1) of
 * each head for RoPE, as the GGUF "llama" convention and our kernels do, so wq/wk need
 * no permutation. The checkpoint's freq_cis tables are not copied (RoPE is recomputed
 * from llama.rope.freq_base = 10000). */
#ifndef MD_LLAMA2C_H
#define MD_LLAMA2C_H

#include "base/status.h"

/* Reads model_bin and tokenizer_bin, writes out_gguf (through PATH.tmp and a rename, so
 * a failed conversion leaves no partial file). The tokenizer must have exactly as many
 * tokens as the checkpoint's |vocab_size|. general.name is model_bin's file name without
 * its directory and ".bin". Returns ST_OK; ST_ERR_IO when a file cannot be opened, read,
 * mapped or written; ST_ERR_FORMAT for an invalid or inconsistent input (the message
 * names the file and field); ST_ERR_UNSUPPORTED on a big-endian host; ST_ERR_NOMEM. */
st_code llama2c_convert(const char *model_bin, const char *tokenizer_bin, const char *out_gguf,
                        st_err *err);

#endif
