/* SPDX-License-Identifier: MIT */
/*
 * auth.c - the client's etcd auth token: obtained with the user's password
 * (/v3/auth/authenticate), sent on every request ("Authorization: TOKEN",
 * which etcd's JSON gateway forwards to its gRPC server), and obtained again
 * when etcd refuses it.
 *
 * etcd's simple tokens end after --auth-token-ttl (300 s by default) without
 * use, and every token is void once the auth store changes (a role granted,
 * a user added: "revision of auth store is old").  http.c sees such a
 * refusal, calls fl__etcd_auth_refresh with the generation of the token the
 * request carried, and sends the request once more: every such refusal
 * comes before the request has any effect (etcd checks the token before it
 * proposes a request, and the auth revision when it applies one, changing
 * nothing then), so sending it again cannot apply it twice.
 *
 * Threads share one token under auth_lock.  The lock is held across the
 * authenticate request, so that of the threads refused at once only the
 * first authenticates; the others wait for it (their own requests would
 * have been refused anyway) and take its token.  auth_gen tells a refresh
 * whether the refused token is still the current one.
 *
 * A request that etcd leaves unanswered until its time is up may carry a
 * token etcd cannot place: a simple token names the raft index it was made
 * at, and a member waits for that index before it reads the token (a
 * cluster restored from an earlier snapshot never reaches it).  http.c then
 * calls fl__etcd_auth_suspect, and the next attempt authenticates again.
 *
 * A cluster without authentication answers "authentication is not enabled":
 * the client then sends no token (as etcdctl does), and authenticates
 * again only if the cluster later answers that a user is needed.
 *
 * The token is a credential like the password: never in a message.  It is
 * checked to be printable ASCII without spaces before it goes into a header
 * (an answer is untrusted: a line break would inject headers).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define FL__ETCD_TOKEN_MAX 8192

/* Ask for a token; under auth_lock. */
static int fl__authenticate_locked(struct fl__etcd_client *c)
{
    json_t *req = json_pack("{s:s, s:s}", "name", c->uri.user, "password", c->password);
    struct fl__etcd_reply rp;
    int err = fl__etcd_post(c, "/v3/auth/authenticate", "authenticate", req,
                            FL__ETCD_IDEMPOTENT | FL__ETCD_NOAUTH | FL__ETCD_SECRET, &rp);
    json_decref(req);
    if (err == -EREMOTEIO) {
        if (strstr(rp.message, "authentication is not enabled")) {
            c->auth_off = true;
            free(c->token);
            c->token = NULL;
            c->auth_gen++;
            return 0;
        }
        return fl__etcd_fail(-EACCES, "etcd %s: user \"%s\" cannot authenticate: %s (code %d)",
                             rp.endpoint, c->uri.user, rp.message, rp.grpc_code);
    }
    if (err)
        return err;
    json_t *t = json_object_get(rp.body, "token");
    const char *tok = json_is_string(t) ? json_string_value(t) : NULL;
    size_t n = tok ? json_string_length(t) : 0;
    bool ok = n > 0 && n <= FL__ETCD_TOKEN_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = tok[i] > ' ' && tok[i] < 0x7f;
    if (!ok) {
        err = fl__etcd_fail(-EPROTO, "etcd %s authenticate: bad answer: field 'token' is not "
                                     "a token (1..%d printable bytes)",
                            rp.endpoint, FL__ETCD_TOKEN_MAX);
        fl__etcd_reply_free(&rp);
        return err;
    }
    char *mine = strdup(tok);
    fl__etcd_reply_free(&rp);
    if (!mine)
        return fl__etcd_fail(-ENOMEM, "out of memory");
    if (c->token)
        explicit_bzero(c->token, strlen(c->token));
    free(c->token);
    c->token = mine;
    c->auth_off = false;
    c->auth_gen++;
    return 0;
}

int fl__etcd_auth_header(struct fl__etcd_client *c, char **line, uint64_t *gen)
{
    *line = NULL;
    *gen = 0;
    if (!c->password)
        return 0; /* no user: no token */
    pthread_mutex_lock(&c->auth_lock);
    int err = 0;
    if (!c->token && !c->auth_off)
        err = fl__authenticate_locked(c);
    if (!err && c->token) {
        size_t n = strlen(c->token) + sizeof "Authorization: ";
        *line = malloc(n);
        if (*line)
            snprintf(*line, n, "Authorization: %s", c->token);
        else
            err = fl__etcd_fail(-ENOMEM, "out of memory");
    }
    *gen = c->auth_gen;
    pthread_mutex_unlock(&c->auth_lock);
    return err;
}

int fl__etcd_auth_refresh(struct fl__etcd_client *c, uint64_t gen)
{
    if (!c->password)
        return fl__etcd_fail(-EACCES, "etcd %s: the cluster requires a user: write "
                                      "etcds://USER@HOST:PORT/PREFIX or set $%s, with "
                                      "password-file=FILE, $%s or $%s",
                             c->uri.shown, FL__ETCD_USER_ENV, FL__ETCD_PASSWORD_FILE_ENV,
                             FL__ETCD_PASSWORD_ENV);
    pthread_mutex_lock(&c->auth_lock);
    int err = 0;
    if (c->auth_gen == gen) /* nobody replaced the refused token yet */
        err = fl__authenticate_locked(c);
    /* When the cluster now says it has no authentication (an operator ran
     * `etcdctl auth disable`), the request goes again without a token. */
    pthread_mutex_unlock(&c->auth_lock);
    return err;
}

bool fl__etcd_auth_suspect(struct fl__etcd_client *c, uint64_t gen)
{
    pthread_mutex_lock(&c->auth_lock);
    bool dropped = c->auth_gen == gen && c->token;
    if (dropped) { /* the next header authenticates again */
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        c->token = NULL;
    }
    bool again = dropped || c->auth_gen != gen;
    pthread_mutex_unlock(&c->auth_lock);
    return again;
}
