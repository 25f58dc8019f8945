// From the connection flags to one connected node-redis client for the life of a command: which
// deployment (--url, --sentinel with --master, or --cluster), the credentials (from the URL or the
// environment; never printed), and a connect bounded by --timeout that leaves no socket open, so a
// command never hangs on an unreachable server and the process exits when it is done.
import * as Fs from "node:fs"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import type { LockAdmin } from "@sage/lock-node-redis"
import { createClient, createCluster, createSentinel } from "redis"
import { CommandFailed } from "../CommandFailed.ts"
import * as Address from "./address.ts"

/** The standalone server when no deployment flag is given. */
export const defaultUrl = "redis://127.0.0.1:6379"

/** The environment variables holding passwords (never a flag: flags show up in `ps`). */
export const passwordVariable = "SAGE_LOCK_PASSWORD"
export const sentinelPasswordVariable = "SAGE_LOCK_SENTINEL_PASSWORD"

/** The connection flags as the command parser gives them. */
export interface ConnectionFlags {
  readonly url: Option.Option<string>
  readonly sentinel: Option.Option<string>
  readonly master: Option.Option<string>
  readonly cluster: Option.Option<string>
  readonly user: Option.Option<string>
  /** TLS to every node and sentinel (a rediss:// --url implies it for that server). */
  readonly tls: boolean
  /** A PEM file with the CA that signed the servers' certificates. */
  readonly ca: Option.Option<string>
  /** Seconds. */
  readonly timeout: number
}

export type Target =
  | { readonly _tag: "Standalone"; readonly url: URL }
  | { readonly _tag: "Sentinel"; readonly sentinels: ReadonlyArray<Address.HostPort>; readonly master: string }
  | { readonly _tag: "Cluster"; readonly nodes: ReadonlyArray<Address.HostPort> }

/** A validated connection: where, as whom, and how long to wait. */
export interface Connection {
  readonly target: Target
  /** The target as text for messages (no credentials). */
  readonly description: string
  readonly username: string | undefined
  readonly password: Redacted.Redacted<string> | undefined
  readonly sentinelPassword: Redacted.Redacted<string> | undefined
  /** TLS settings for every connection (the CA's PEM text, when --ca was given), or undefined for plain TCP. */
  readonly tls: { readonly ca: string | undefined } | undefined
  readonly timeoutMillis: number
}

const fail = (message: string) => Effect.fail(new CommandFailed({ message }))

const envPassword = (name: string) =>
  Config.Redacted(name).pipe(
    Config.option,
    Config.map(Option.filter((value) => Redacted.value(value).length > 0)),
    Config.map(Option.getOrUndefined)
  )

/** The URL of --url checked, with its credentials taken out (they travel as options, never in text). */
const standaloneUrl = (
  text: string
): Effect.Effect<{ url: URL; username?: string; password?: string }, CommandFailed> => {
  const url = URL.parse(text)
  // The text is not echoed: it may hold a password.
  if (url === null) return fail("--url is not a valid URL (expected redis://[user:password@]host:port[/db])")
  if (url.protocol !== "redis:" && url.protocol !== "rediss:")
    return fail("--url must start with redis:// or rediss://")
  if (url.hostname === "") return fail("--url has no host")
  // A query or fragment, or a path other than the database, is what a password written unencoded
  // (with ?, # or /) turns into: refused rather than connected to a host read out of the password.
  if (url.search !== "" || url.hash !== "" || !/^(\/\d*)?$/.test(url.pathname)) {
    return fail(
      "--url may only name a database after the host (redis://host:port/0); encode ?, # and / in a password (%3F, %23, %2F), or set SAGE_LOCK_PASSWORD"
    )
  }
  const username = url.username === "" ? undefined : decodeURIComponent(url.username)
  const password = url.password === "" ? undefined : decodeURIComponent(url.password)
  url.username = ""
  url.password = ""
  return Effect.succeed({
    url,
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password })
  })
}

const addresses = (flag: string, list: string) => {
  const parsed = Address.parseList(list)
  return Result.isFailure(parsed) ? fail(`--${flag}: ${parsed.failure}`) : Effect.succeed(parsed.success)
}

/** The PEM text of --ca, checked to hold at least one certificate. */
const readCa = (path: string): Effect.Effect<string, CommandFailed> =>
  Effect.try({
    try: () => Fs.readFileSync(path, "utf8"),
    catch: (error) =>
      new CommandFailed({
        message: `--ca: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`
      })
  }).pipe(
    Effect.flatMap((text) =>
      text.includes("-----BEGIN CERTIFICATE-----")
        ? Effect.succeed(text)
        : fail(`--ca: ${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`)
    )
  )

/**
 * Checks the flags and reads the passwords from the environment. Exactly one deployment: --url
 * (default redis://127.0.0.1:6379), --sentinel with --master, or --cluster.
 */
export const fromFlags = (flags: ConnectionFlags): Effect.Effect<Connection, CommandFailed> =>
  Effect.gen(function* () {
    const chosen = [flags.url, flags.sentinel, flags.cluster].filter(Option.isSome).length
    if (chosen > 1) return yield* fail("give one of --url, --sentinel (with --master) or --cluster, not several")
    if (Option.isSome(flags.master) && Option.isNone(flags.sentinel)) {
      return yield* fail("--master names the master the sentinels watch: it needs --sentinel host:port[,...]")
    }
    if (!Number.isFinite(flags.timeout) || flags.timeout <= 0 || flags.timeout > 600) {
      return yield* fail("--timeout must be a number of seconds above 0 and at most 600")
    }
    const timeoutMillis = Math.ceil(flags.timeout * 1000)
    const env = yield* Config.all({
      password: envPassword(passwordVariable),
      sentinelPassword: envPassword(sentinelPasswordVariable)
    }).pipe(Effect.mapError(() => new CommandFailed({ message: `${passwordVariable} could not be read` })))
    const user = Option.getOrUndefined(flags.user)
    if (user !== undefined && user.trim() === "") return yield* fail("--user needs a user name")
    const rediss = Option.isSome(flags.url) && flags.url.value.trim().toLowerCase().startsWith("rediss:")
    if (Option.isSome(flags.ca) && !flags.tls && !rediss) {
      return yield* fail("--ca is the CA for TLS connections: add --tls (or give a rediss:// --url)")
    }
    const ca = Option.isSome(flags.ca) ? yield* readCa(flags.ca.value) : undefined
    const tls = flags.tls || rediss ? { ca } : undefined
    const common = { sentinelPassword: env.sentinelPassword, tls, timeoutMillis }

    if (Option.isSome(flags.sentinel)) {
      if (Option.isNone(flags.master) || flags.master.value.trim() === "") {
        return yield* fail("--sentinel needs --master <name>: the master name the sentinels monitor")
      }
      const sentinels = yield* addresses("sentinel", flags.sentinel.value)
      const master = flags.master.value.trim()
      return {
        target: { _tag: "Sentinel", sentinels, master },
        description: `master "${master}" of sentinels ${sentinels.map(Address.format).join(",")}`,
        username: user,
        password: env.password,
        ...common
      }
    }
    if (Option.isSome(flags.cluster)) {
      const nodes = yield* addresses("cluster", flags.cluster.value)
      return {
        target: { _tag: "Cluster", nodes },
        description: `cluster ${nodes.map(Address.format).join(",")}`,
        username: user,
        password: env.password,
        ...common
      }
    }
    const parsed = yield* standaloneUrl(Option.getOrElse(flags.url, () => defaultUrl))
    // node-redis takes TLS for a standalone server from the URL's scheme only.
    if (tls !== undefined) parsed.url.protocol = "rediss:"
    return {
      target: { _tag: "Standalone", url: parsed.url },
      description: parsed.url.href,
      // The URL's credentials win over --user and the environment: they were given for this server.
      username: parsed.username ?? user,
      password: parsed.password === undefined ? env.password : Redacted.make(parsed.password),
      ...common
    }
  })

/** The passwords of a connection, raw and URL-encoded: no message may contain them. */
export const secretsOf = (connection: Connection): Array<string> =>
  [connection.password, connection.sentinelPassword].flatMap((secret) => {
    if (secret === undefined) return []
    const value = Redacted.value(secret)
    return [value, encodeURIComponent(value)]
  })

/** `text` with every secret replaced by `***`. */
export const redact = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((out, secret) => (secret.length === 0 ? out : out.split(secret).join("***")), text)

/** The part of a node-redis client the scoped connect needs. */
interface Closeable {
  on(event: "error", listener: (error: unknown) => void): unknown
  connect(): Promise<unknown>
  close(): Promise<unknown>
  destroy(): unknown
}

/** A failure's own words: node-redis errors, AggregateErrors of several addresses, or anything else. */
export const reasonOf = (error: unknown): string => {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return [...new Set(error.errors.map(reasonOf))].join("; ")
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code
    return error.message !== "" ? error.message : typeof code === "string" ? code : error.name
  }
  return String(error)
}

/** Runs a client's close or destroy, ignoring its failure, and waits at most 2 s for it to settle. */
const quietly = (run: () => unknown): Effect.Effect<void> =>
  Effect.promise(() =>
    Promise.resolve()
      .then(run)
      .catch(() => {})
  ).pipe(
    // A Sentinel client's destroy never settles when its sentinel accepted and never answered.
    Effect.timeoutOption(2_000),
    Effect.asVoid
  )

const connectScoped = <C extends Closeable>(
  connection: Connection,
  create: () => C
): Effect.Effect<C, CommandFailed, Scope.Scope> => {
  const secrets = secretsOf(connection)
  const failed = (reason: string) =>
    new CommandFailed({ message: redact(`cannot connect to ${connection.description}: ${reason}`, secrets) })
  return Effect.gen(function* () {
    // Only making the client is the acquisition: the connect runs after it, interruptible, so
    // Ctrl-C stops a connect that never settles at once rather than at --timeout. Whatever the
    // outcome, the scope closes and then destroys the client, each bounded.
    let lastError: unknown
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = create()
        // Socket errors surface as the connect or command failure; unhandled, they would crash node.
        client.on("error", (error) => {
          lastError = error
        })
        return client
      }),
      (client) =>
        Effect.andThen(
          quietly(() => client.close()),
          quietly(() => client.destroy())
        )
    )
    yield* Effect.tryPromise({
      try: () => client.connect(),
      // A Cluster client that reached no root node says only that; each node's own failure
      // (WRONGPASS, not a cluster, refused) came before it as an error event.
      catch: (error) =>
        failed(
          reasonOf(
            error instanceof Error && error.message.startsWith("All the root nodes are unavailable") && lastError
              ? lastError
              : error
          )
        )
    }).pipe(
      Effect.timeoutOrElse({
        duration: connection.timeoutMillis,
        orElse: () => Effect.fail(failed(`no connection within ${connection.timeoutMillis} ms (--timeout)`))
      }),
      // A failed connect is destroyed at once: a close would wait on the connect it abandons.
      Effect.tapError(() => quietly(() => client.destroy()))
    )
    return client
  })
}

/**
 * Settings every node connection gets: one attempt (no reconnect loop). node-redis's own connect
 * timeout is a backstop a second past ours, so the message a user reads is ours ("no connection
 * within"), not node-redis's "Socket closed unexpectedly".
 */
const nodeOptions = (connection: Connection) => ({
  ...(connection.username === undefined ? {} : { username: connection.username }),
  ...(connection.password === undefined ? {} : { password: Redacted.value(connection.password) }),
  socket: {
    connectTimeout: connection.timeoutMillis + 1_000,
    reconnectStrategy: false as const,
    ...tlsOptions(connection)
  }
})

/** The socket's TLS settings: verify the server against --ca when given, else the system's CAs. */
const tlsOptions = (connection: Connection) =>
  connection.tls === undefined
    ? {}
    : { tls: true as const, ...(connection.tls.ca === undefined ? {} : { ca: connection.tls.ca }) }

/** The connected client for `connection`, closed with the scope. */
export const connect = (connection: Connection): Effect.Effect<LockAdmin.Client, CommandFailed, Scope.Scope> => {
  const target = connection.target
  switch (target._tag) {
    case "Standalone":
      return connectScoped(connection, () => {
        const options = nodeOptions(connection)
        const url = target.url
        // node-redis looks a bracketed IPv6 host (`redis://[::1]:6379`) up as a name: give it the
        // parts instead (the credentials were taken out of the URL already).
        if (!url.hostname.startsWith("[")) return createClient({ url: url.href, ...options, disableOfflineQueue: true })
        const database = /^\/(\d+)$/.exec(url.pathname)?.[1]
        return createClient({
          ...options,
          ...(database === undefined ? {} : { database: Number(database) }),
          socket: {
            ...options.socket,
            host: url.hostname.slice(1, -1),
            port: url.port === "" ? 6379 : Number(url.port)
          },
          disableOfflineQueue: true
        })
      })
    case "Sentinel":
      return connectScoped(connection, () =>
        createSentinel({
          name: target.master,
          sentinelRootNodes: target.sentinels.map(({ host, port }) => ({ host, port })),
          nodeClientOptions: nodeOptions(connection),
          sentinelClientOptions: {
            ...(connection.sentinelPassword === undefined
              ? {}
              : { password: Redacted.value(connection.sentinelPassword) }),
            socket: { connectTimeout: connection.timeoutMillis + 1_000, ...tlsOptions(connection) }
          }
        })
      )
    case "Cluster":
      return connectScoped(connection, () =>
        createCluster({
          rootNodes: target.nodes.map(({ host, port }) => ({ socket: { host, port } })),
          defaults: nodeOptions(connection)
        })
      )
  }
}
