/* examples/transfer.c: moves an amount between two accounts kept in files,
 * holding both accounts' locks at once with a multi-lock, so that two
 * transfers in opposite directions (a to b while b to a) never deadlock.
 *
 *   transfer [-s HOSTS] [-p PATH] [-t SECONDS] DIR FROM TO AMOUNT
 *
 * Locks PATH/FROM and PATH/TO (zkr_multilock_acquire: both or neither,
 * taken in the byte order of their paths whatever order they are named
 * in, one timeout for both), then reads DIR/FROM and DIR/TO (numbers; a
 * missing file is 0), writes them back with AMOUNT moved, and prints both
 * fencing tokens: a store that checks them (zkr_fence(3)) would refuse a
 * transfer that went on after its locks were lost. Run many at once, in
 * both directions: the sum over the accounts never changes.
 *
 * Exit status: 0; 1 on an error; 2 if the locks were not had in time.
 *
 * Build: cc transfer.c $(pkg-config --cflags --libs zkr) */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zkr.h>

static long long get(const char *dir, const char *name)
{
    char file[512];
    long long v = 0;
    FILE *f;

    snprintf(file, sizeof(file), "%s/%s", dir, name);
    if ((f = fopen(file, "r")) != NULL) {
        if (fscanf(f, "%lld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

static int put(const char *dir, const char *name, long long v)
{
    char file[512], tmp[520];
    FILE *f;

    snprintf(file, sizeof(file), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    if ((f = fopen(tmp, "w")) == NULL)
        return -1;
    fprintf(f, "%lld\n", v);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, file);
}

int main(int argc, char **argv)
{
    const char *hosts = "127.0.0.1:2181", *path = "/example/accounts";
    const char *dir, *from, *to;
    char pfrom[256], pto[256];
    zkr_session_t *s = NULL;
    zkr_lock_t *lf = NULL, *lt = NULL;
    zkr_multilock_t *both = NULL;
    long long amount;
    int64_t tf = 0, tt = 0;
    int opt, rc, status = 1, timeout_ms = 30000;

    while ((opt = getopt(argc, argv, "s:p:t:")) != -1) {
        if (opt == 's')
            hosts = optarg;
        else if (opt == 'p')
            path = optarg;
        else if (opt == 't')
            timeout_ms = (int)(atof(optarg) * 1000);
        else
            return 1;
    }
    if (argc - optind != 4) {
        fprintf(stderr, "usage: transfer [-s HOSTS] [-p PATH] [-t SECONDS] "
                        "DIR FROM TO AMOUNT\n");
        return 1;
    }
    dir = argv[optind];
    from = argv[optind + 1];
    to = argv[optind + 2];
    amount = atoll(argv[optind + 3]);
    snprintf(pfrom, sizeof(pfrom), "%s/%s", path, from);
    snprintf(pto, sizeof(pto), "%s/%s", path, to);

    if ((rc = zkr_session_open(&s, hosts, 10000, NULL)) != 0 ||
        (rc = zkr_lock_new(&lf, s, pfrom, NULL, NULL)) != 0 ||
        (rc = zkr_lock_new(&lt, s, pto, NULL, NULL)) != 0) {
        fprintf(stderr, "transfer: %s\n", zkr_strerror(rc));
        goto out;
    }
    {
        zkr_lock_t *members[2] = {lf, lt};
        if ((rc = zkr_multilock_new(&both, members, 2)) != 0) {
            fprintf(stderr, "transfer: %s\n", zkr_strerror(rc));
            goto out;
        }
    }
    rc = zkr_multilock_acquire(both, timeout_ms);
    if (rc == ZKR_ETIMEDOUT) {
        fprintf(stderr, "transfer: %s and %s not had in time\n", pfrom, pto);
        status = 2;
        goto out;
    }
    if (rc != 0) {
        fprintf(stderr, "transfer: %s\n", zkr_strerror(rc));
        goto out;
    }
    zkr_lock_token(lf, &tf);
    zkr_lock_token(lt, &tt);
    if (put(dir, from, get(dir, from) - amount) != 0 ||
        put(dir, to, get(dir, to) + amount) != 0)
        perror("transfer");
    else
        status = 0;
    printf("%s -> %s %lld (tokens %" PRId64 " %" PRId64 ")\n", from, to, amount,
           tf, tt);
    rc = zkr_multilock_release(both);
    if (rc != 0) { /* ZKR_ELOST: a lock was lost before the release */
        fprintf(stderr, "transfer: release: %s\n", zkr_strerror(rc));
        status = 1;
    }
out:
    zkr_multilock_free(both); /* before its members */
    zkr_lock_free(lf);
    zkr_lock_free(lt);
    zkr_session_free(s);
    return status;
}
