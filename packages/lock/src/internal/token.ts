// The tokens a lock key holds: unique to one call (or one waiter), never secret.
//
// A token only has to differ from every other holder's, so each one is this module's random UUID
// (made once, when it loads) followed by a counter: `<uuid>.<n in base 36>`. A `crypto.randomUUID()`
// per call did the same job with more work on every call: Node builds its text out of twenty
// concatenations, about 0.6 KB of garbage a call.
// Tokens never contain `:`, which the grant tokens a release writes (`<waiter id>:<fence>`) use, so
// no token can be read as a grant.

const processPrefix = globalThis.crypto.randomUUID()
let issued = 0

/** A token no other call or waiter of any process holds. */
export const newToken = (): string => `${processPrefix}.${(++issued).toString(36)}`
