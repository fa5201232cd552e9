/* examples/fenced_sqlite.c: the resource side of fencing, in SQL.
 *
 *   fenced_sqlite DB ID VALUE TOKEN
 *
 * Sets resource ID to VALUE in the SQLite database DB, fenced by TOKEN (a
 * zkr fencing token, e.g. from zkr_lock_token() or $ZKR_FENCE). The whole
 * rule is one statement: the row changes only if no higher token was
 * applied to it before, and the token is stored with the value.
 *
 *   UPDATE resource SET value = :value, fence = :token
 *    WHERE id = :id AND fence < :token
 *
 * (`fence < :token` allows one write per grant; use `fence <= :token` to
 * let the same grant write several times.) If no row changed, the token
 * was stale: a newer holder has written since, and this write must not
 * happen. The rule is for exclusive grants (a lock, a write lock, a
 * leader), whose tokens grow from one holder to the next; readers and
 * semaphore permits hold different tokens at once. Exits 0 when applied, 3 when
 * rejected as stale, 1 on errors.
 *
 * Build: cc fenced_sqlite.c -lsqlite3 */
#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

static int fail(sqlite3 *db, const char *what)
{
    fprintf(stderr, "fenced_sqlite: %s: %s\n", what, sqlite3_errmsg(db));
    sqlite3_close(db);
    return 1;
}

int main(int argc, char **argv)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    long long token;
    int changed;

    if (argc != 5 || (token = atoll(argv[4])) <= 0) {
        fprintf(stderr, "usage: %s DB ID VALUE TOKEN\n", argv[0]);
        return 1;
    }
    if (sqlite3_open(argv[1], &db) != SQLITE_OK)
        return fail(db, "open");
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db,
                     "CREATE TABLE IF NOT EXISTS resource ("
                     " id TEXT PRIMARY KEY, value TEXT,"
                     " fence INTEGER NOT NULL DEFAULT 0);",
                     NULL, NULL, NULL) != SQLITE_OK)
        return fail(db, "create table");
    /* Make sure the row exists (fence 0: any token is newer). */
    if (sqlite3_prepare_v2(db,
                           "INSERT OR IGNORE INTO resource (id, value, fence)"
                           " VALUES (?1, NULL, 0);",
                           -1, &st, NULL) != SQLITE_OK)
        return fail(db, "prepare insert");
    sqlite3_bind_text(st, 1, argv[2], -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE)
        return fail(db, "insert");
    sqlite3_finalize(st);

    /* The fenced write. */
    if (sqlite3_prepare_v2(db,
                           "UPDATE resource SET value = :value, fence = :token"
                           " WHERE id = :id AND fence < :token;",
                           -1, &st, NULL) != SQLITE_OK)
        return fail(db, "prepare update");
    sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, ":value"), argv[3],
                      -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":token"), token);
    sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, ":id"), argv[2], -1,
                      SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE)
        return fail(db, "update");
    sqlite3_finalize(st);
    changed = sqlite3_changes(db);
    sqlite3_close(db);
    if (changed != 1) {
        printf("rejected: token %lld is stale for %s\n", token, argv[2]);
        return 3;
    }
    printf("applied: %s = %s (token %lld)\n", argv[2], argv[3], token);
    return 0;
}
