/* sha256.h - SHA-256 (FIPS 180-4), incremental, for identifying model files.
 *
 * A small, dependency-free implementation: init, feed any number of byte runs, finish.
 * It is used by the session module to fingerprint a GGUF file (session.h says which
 * bytes); it is not constant-time and not meant for anything cryptographically
 * sensitive beyond "is this the same file". */
#ifndef MD_SHA256_H
#define MD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32

typedef struct sha256_ctx {
    uint32_t h[8];     /* chaining state */
    uint64_t n_bytes;  /* message length so far */
    uint8_t buf[64];   /* partial block */
    uint32_t n_buf;    /* bytes in buf (< 64) */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
/* Feeds n bytes (data may be NULL when n is 0). */
void sha256_update(sha256_ctx *c, const void *data, size_t n);
/* Writes the digest; c must be re-initialised before reuse. */
void sha256_final(sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);
/* One-shot digest of n bytes. */
void sha256(const void *data, size_t n, uint8_t out[SHA256_DIGEST_LEN]);
/* Lower-case hex of a digest: 64 characters and a NUL into out. */
void sha256_hex(const uint8_t d[SHA256_DIGEST_LEN], char out[2 * SHA256_DIGEST_LEN + 1]);

#endif
