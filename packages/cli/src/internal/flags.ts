// The flags every `sage-lock` command takes: where the servers are (a standalone URL, Sentinel or
// Cluster), how to authenticate and connect, the namespace and the time budget; and `--json`.
import { Flag } from "effect/cli"
import * as Connection from "./connection.ts"

/** The connection flags, with the lock namespace (the semaphore and election commands replace it). */
export const connectionFlags = {
  url: Flag.String("url").pipe(
    Flag.withDescription(
      `A standalone server: redis://[user:password@]host:port[/db] or rediss:// (default ${Connection.defaultUrl})`
    ),
    Flag.optional
  ),
  sentinel: Flag.String("sentinel").pipe(
    Flag.withDescription("Sentinels to ask for the master: host:port[,host:port...] (with --master)"),
    Flag.optional
  ),
  master: Flag.String("master").pipe(
    Flag.withDescription("The master name the sentinels monitor (with --sentinel)"),
    Flag.optional
  ),
  cluster: Flag.String("cluster").pipe(
    Flag.withDescription("Cluster nodes to start from: host:port[,host:port...]"),
    Flag.optional
  ),
  user: Flag.String("user").pipe(
    Flag.withDescription(
      `ACL user name (a user in --url wins); the password comes from --url or ${Connection.passwordVariable}`
    ),
    Flag.optional
  ),
  tls: Flag.Boolean("tls").pipe(
    Flag.withDescription("TLS to every server and sentinel (a rediss:// --url turns it on for that server)"),
    Flag.withDefault(false)
  ),
  ca: Flag.String("ca").pipe(
    Flag.withDescription("A PEM file with the CA that signed the servers' certificates (with TLS)"),
    Flag.optional
  ),
  namespace: Flag.String("namespace").pipe(
    Flag.withDescription('The lock namespace (Lock.make\'s `namespace`; default "lock")'),
    Flag.withDefault("lock")
  ),
  timeout: Flag.Finite("timeout").pipe(
    Flag.withDescription("Seconds to wait for a connection or a reply (default 5)"),
    Flag.withDefault(5)
  )
}

/** `--json`: one line of JSON on standard output instead of text. */
export const json = Flag.Boolean("json").pipe(
  Flag.withDescription("Print one line of JSON (for scripts)"),
  Flag.withDefault(false)
)

/** What a command's parsed flags hold: the connection and the namespace. */
export type Flags = Connection.ConnectionFlags & { readonly namespace: string }
