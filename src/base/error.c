/* Error codes: one X-macro table (include/zkr.h) feeds the enum, the
 * messages and the names, so they cannot drift apart. */
#include "base.h"

const char *zkr_strerror(int rc)
{
    switch (rc) {
#define ZKR__ERR_MSG(name, val, text)                                          \
    case ZKR_##name:                                                           \
        return text;
        ZKR_ERRNO_MAP(ZKR__ERR_MSG)
#undef ZKR__ERR_MSG
    default:
        break;
    }
    /* The ZooKeeper codes a misconfiguration causes: zerror()'s text, then
     * what to check. */
    switch (rc) {
    case ZNOAUTH:
        return "not authenticated: the node's ACL, or its parent's, does not "
               "give this session the permission; check the path's ACL "
               "(getAcl) and the session's credentials (digest)";
    case ZINVALIDACL:
        return "invalid acl: an ACL of 'auth' or 'digest' ids (such as "
               "ZOO_CREATOR_ALL_ACL) needs credentials added to the session "
               "first (digest), or the ACL vector is empty or malformed";
    case ZAUTHFAILED:
        return "authentication failed: the server refused the "
               "credentials; check the user:password of the digest";
    default:
        break;
    }
    if (rc > -1000) {
        const char *z = zerror(rc);
        if (z != NULL)
            return z;
    }
    return "unknown error";
}

const char *zkr_errname(int rc)
{
    switch (rc) {
#define ZKR__ERR_NAME(name, val, text)                                         \
    case ZKR_##name:                                                           \
        return "ZKR_" #name;
        ZKR_ERRNO_MAP(ZKR__ERR_NAME)
#undef ZKR__ERR_NAME
#define ZKR__ZNAME(c)                                                          \
    case c:                                                                    \
        return #c;
        ZKR__ZNAME(ZOK)
        ZKR__ZNAME(ZSYSTEMERROR)
        ZKR__ZNAME(ZRUNTIMEINCONSISTENCY)
        ZKR__ZNAME(ZDATAINCONSISTENCY)
        ZKR__ZNAME(ZCONNECTIONLOSS)
        ZKR__ZNAME(ZMARSHALLINGERROR)
        ZKR__ZNAME(ZUNIMPLEMENTED)
        ZKR__ZNAME(ZOPERATIONTIMEOUT)
        ZKR__ZNAME(ZBADARGUMENTS)
        ZKR__ZNAME(ZINVALIDSTATE)
        ZKR__ZNAME(ZNEWCONFIGNOQUORUM)
        ZKR__ZNAME(ZRECONFIGINPROGRESS)
        ZKR__ZNAME(ZSSLCONNECTIONERROR)
        ZKR__ZNAME(ZAPIERROR)
        ZKR__ZNAME(ZNONODE)
        ZKR__ZNAME(ZNOAUTH)
        ZKR__ZNAME(ZBADVERSION)
        ZKR__ZNAME(ZNOCHILDRENFOREPHEMERALS)
        ZKR__ZNAME(ZNODEEXISTS)
        ZKR__ZNAME(ZNOTEMPTY)
        ZKR__ZNAME(ZSESSIONEXPIRED)
        ZKR__ZNAME(ZINVALIDCALLBACK)
        ZKR__ZNAME(ZINVALIDACL)
        ZKR__ZNAME(ZAUTHFAILED)
        ZKR__ZNAME(ZCLOSING)
        ZKR__ZNAME(ZNOTHING)
        ZKR__ZNAME(ZSESSIONMOVED)
        ZKR__ZNAME(ZNOTREADONLY)
        ZKR__ZNAME(ZEPHEMERALONLOCALSESSION)
        ZKR__ZNAME(ZNOWATCHER)
        ZKR__ZNAME(ZRECONFIGDISABLED)
        ZKR__ZNAME(ZSESSIONCLOSEDREQUIRESASLAUTH)
        ZKR__ZNAME(ZTHROTTLEDOP)
#undef ZKR__ZNAME
    default:
        return "UNKNOWN";
    }
}

const char *zkr_state_name(zkr_state_t state)
{
    static const char *const names[] = {"CONNECTING",  "CONNECTED", "SUSPENDED",
                                        "RECONNECTED", "LOST",      "CLOSED"};
    if ((unsigned)state < sizeof(names) / sizeof(names[0]))
        return names[state];
    return "UNKNOWN";
}

const char *zkr_lock_state_name(zkr_lock_state_t state)
{
    static const char *const names[] = {"IDLE",      "ACQUIRING", "HELD",
                                        "SUSPENDED", "LOST",      "RELEASING",
                                        "DELAYED"};
    if ((unsigned)state < sizeof(names) / sizeof(names[0]))
        return names[state];
    return "UNKNOWN";
}
