/* SPDX-License-Identifier: MIT */
/*
 * fuzz_proto.c - libFuzzer harness for the other parsers of untrusted bytes
 * in the library: the supervisor's parse of a hello from any local process,
 * the client's parse of a supervisor's reply, the supervisor's parse of a
 * registered client's goodbye, and key validation (I9).
 */
#include <stdlib.h>
#include <string.h>

#include "shm/shm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[160];
    struct fl__hello h;
    if (fl__hello_parse(data, size, &h, why, sizeof why) == 0 && h.magic != FL__HELLO_MAGIC)
        abort(); /* accepted something it must refuse */
    struct fl__reply rep;
    uint32_t cap = size > 0 ? data[0] + 1u : 2u;
    if (fl__reply_parse(data, size, cap, &rep, why, sizeof why) == 0 && rep.status == 0 &&
        (rep.client == 0 || rep.client >= cap))
        abort();
    struct fl__goodbye bye;
    if (fl__goodbye_parse(data, size, &bye, why, sizeof why) == 0 &&
        (size != sizeof bye || bye.magic != FL__GOODBYE_MAGIC || bye.reserved != 0))
        abort();
    char *key = malloc(size + 1);
    if (!key)
        return 0;
    memcpy(key, data, size);
    key[size] = '\0';
    int len = fl__key_check(key);
    if (len > 0 && (len > FL_KEY_MAX || (size_t)len != strlen(key)))
        abort();
    free(key);
    return 0;
}
