/* test_sha256.c — SHA-256 against FIPS 180-4's examples ("abc", the 448-bit message, one
 * million 'a' fed in odd-sized pieces) and HMAC-SHA256 against RFC 4231's test cases 1-4, 6
 * and 7 (case 5 checks a truncated output, which nothing here uses); exact bytes. Also the
 * two-part message form (msg1 || msg2) equals the one-part form, and the constant-time compare. */
#include <stdio.h>
#include <string.h>

#include "core/sha256.h"
#include "test/test.h"

static void hex(const uint8_t *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static size_t unhex(const char *s, uint8_t *out) {
    size_t n = strlen(s) / 2;
    for (size_t i = 0; i < n; i++) sscanf(s + 2 * i, "%2hhx", &out[i]);
    return n;
}

static void check_sha(const char *msg, const char *want) {
    uint8_t d[32];
    char got[65];
    mt_sha256_ctx c;
    mt_sha256_init(&c);
    mt_sha256_update(&c, msg, strlen(msg));
    mt_sha256_final(&c, d);
    hex(d, 32, got);
    CHECKF(strcmp(got, want) == 0, "SHA-256(\"%.20s...\") = %s, want %s", msg, got, want);
}

int main(void) {
    check_sha("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_sha("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    {
        static char a[1000000];
        memset(a, 'a', sizeof a);
        mt_sha256_ctx c;
        uint8_t d[32];
        char got[65];
        mt_sha256_init(&c);
        for (size_t off = 0, step = 1; off < sizeof a; off += step, step = step * 3 % 1000 + 1)
            mt_sha256_update(&c, a + off, off + step > sizeof a ? sizeof a - off : step);
        mt_sha256_final(&c, d);
        hex(d, 32, got);
        CHECKF(strcmp(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
               "SHA-256(a x 1e6) = %s", got);
    }
    /* RFC 4231 section 4: key (hex), data (hex), HMAC-SHA-256 (hex) */
    static const char *const cases[][3] = {
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
         "dddd",
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {"0102030405060708090a0b0c0d0e0f10111213141516171819",
         "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
         "cdcd",
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579"
         "204669727374",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b65"
         "7920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565"
         "647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c"
         "676f726974686d2e",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    static const int case_no[] = {1, 2, 3, 4, 6, 7};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t key[256], data[256], mac[32];
        char got[65];
        size_t n_key = unhex(cases[i][0], key), n_data = unhex(cases[i][1], data);
        mt_hmac_sha256(key, n_key, data, n_data, NULL, 0, mac);
        hex(mac, 32, got);
        CHECKF(strcmp(got, cases[i][2]) == 0, "RFC 4231 case %d: %s, want %s", case_no[i], got, cases[i][2]);
        /* split anywhere: the same MAC */
        uint8_t mac2[32];
        mt_hmac_sha256(key, n_key, data, n_data / 3, data + n_data / 3, n_data - n_data / 3, mac2);
        CHECKF(memcmp(mac, mac2, 32) == 0, "RFC 4231 case %d: two-part message differs", case_no[i]);
    }
    CHECK(mt_bytes_equal_ct("abcd", "abcd", 4));
    CHECK(!mt_bytes_equal_ct("abcd", "abce", 4));
    CHECK(mt_bytes_equal_ct("", "x", 0));
    TEST_MAIN_END();
}
