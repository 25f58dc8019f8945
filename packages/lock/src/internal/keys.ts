// The only place that knows the Redis key format: `<namespace>:{<escaped key>}`.
//
// The braces are a Cluster hash tag, so any companion key of the same lock (`<...>}:fence`) hashes to
// the same slot. The tag is the text between the first `{` and the first `}` after it, so the key
// text must contain neither brace, and must not be empty (an empty tag `{}` disables tagging and
// would scatter a lock's keys). Escaping `%`, `{` and `}` as `%25`, `%7B`, `%7D` keeps the mapping
// one-to-one. Namespaces are validated to contain no braces, so they never shorten the tag.
//
// Codecs reject empty and ill-formed text (`KeyCodec.make` checks every codec's result). As a second
// line, a lone surrogate that still arrives here is escaped as `%uXXXX` rather than handed to the
// UTF-8 encoder, which would turn every one of them into U+FFFD and make distinct keys one key.

const escapes: Record<string, string> = { "%": "%25", "{": "%7B", "}": "%7D" }

const escape = (c: string): string => escapes[c] ?? `%u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`

// Any character that may need escaping: the three, or any surrogate code unit, paired or not (this
// regex has no `u` flag). Most keys have none, and this test costs a fraction of the replace below.
const mayNeedEscape = /[%{}\uD800-\uDFFF]/

/** The hash-tagged Redis key for a namespace and the codec's (non-empty) text. */
export const lockKey = (namespace: string, encoded: string): string =>
  `${namespace}:{${mayNeedEscape.test(encoded) ? encoded.replace(/[%{}]|\p{Cs}/gu, escape) : encoded}}`

// Companions of a lock key, all inside the same hash tag (so on the same Cluster slot). The queue
// keys exist only while some process waits for the lock, and expire on their own; the fence key
// outlives the lock by a fixed retention (see `LockScripts.fenceRetentionMillis`).

/** The last fencing token issued for a lock (a string holding an integer, with a long expiry). */
export const fenceKey = (lock: string): string => `${lock}:fence`

/** The waiters of a lock in arrival order (ZSET: waiter id -> first registration, server ms). */
export const waitersKey = (lock: string): string => `${lock}:waiters`

/** When each waiter's registration lapses (ZSET: waiter id -> expiry, server ms). */
export const waitingUntilKey = (lock: string): string => `${lock}:waiting`

/** The channel a release publishes on, naming the waiter whose turn it is. */
export const wakeChannel = (lock: string): string => `${lock}:wake`

// A semaphore's own companions (its holders live in the main key, a ZSET: token -> lease end, server
// ms). Both expire with the semaphore's holders and waiters.

/** How many permits each holder has, and the semaphore's limit and permits in use (HASH). */
export const permitsKey = (semaphore: string): string => `${semaphore}:permits`

/** How many permits each registered waiter asks for (HASH: waiter id -> permits). */
export const asksKey = (semaphore: string): string => `${semaphore}:asks`
