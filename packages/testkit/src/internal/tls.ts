/**
 * Certificates for a TLS-only test server, made with the `openssl` CLI in the server's temp
 * directory: a throwaway CA, and a server certificate signed by it for 127.0.0.1 and localhost. They
 * live and die with the directory; nothing is trusted system-wide.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** Where the PEM files are, and the CA's PEM text for clients (node `tls` option `ca`). */
export interface Certificates {
  readonly caFile: string
  readonly certFile: string
  readonly keyFile: string
  readonly ca: string
}

const run = (dir: string, args: ReadonlyArray<string>): void => {
  const result = ChildProcess.spawnSync("openssl", [...args], { cwd: dir, encoding: "utf8", timeout: 30_000 })
  if (result.error !== undefined) throw new Error(`openssl ${args[0]} failed to start: ${result.error.message}`)
  if (result.status !== 0) throw new Error(`openssl ${args.join(" ")} exited ${result.status}: ${result.stderr}`)
}

/** Generates a CA and a server certificate in `dir/tls` (throws with openssl's output on failure). */
export const generate = (dir: string): Certificates => {
  const tlsDir = Path.join(dir, "tls")
  Fs.mkdirSync(tlsDir, { recursive: true })
  // prettier-ignore
  run(tlsDir, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
    "-days", "2", "-subj", "/CN=sage-lock-testkit CA"])
  // prettier-ignore
  run(tlsDir, ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
    "-subj", "/CN=localhost"])
  Fs.writeFileSync(Path.join(tlsDir, "server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  // prettier-ignore
  run(tlsDir, ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
    "-out", "server.crt", "-days", "2", "-extfile", "server.ext"])
  const caFile = Path.join(tlsDir, "ca.crt")
  return {
    caFile,
    certFile: Path.join(tlsDir, "server.crt"),
    keyFile: Path.join(tlsDir, "server.key"),
    ca: Fs.readFileSync(caFile, "utf8")
  }
}
