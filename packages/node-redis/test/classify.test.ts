// The classifier's table, with the reply texts the guide recorded from Redis 7, Redis 8 and Valkey 8
// (the real servers' replies are also exercised by the contract and wire suites).
import { assert, describe, it } from "@effect/vitest"
import {
  ClientClosedError,
  ClientOfflineError,
  DisconnectsClientError,
  SimpleError,
  SocketClosedUnexpectedlyError,
  TimeoutError
} from "redis"
import { classify } from "../src/internal/connection/classify.ts"

describe("classify", () => {
  const temporary = [
    "LOADING Redis is loading the dataset in memory",
    "LOADING Valkey is loading the dataset in memory",
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    "BUSY Valkey is busy running a script.",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    "READONLY You can't write against a read only replica.",
    "NOREPLICAS Not enough good replicas to write.",
    "TRYAGAIN Multiple keys request during rehashing of slot",
    "CLUSTERDOWN The cluster is down",
    "CLUSTERDOWN Hash slot not served",
    "MOVED 6035 127.0.0.1:7001",
    "ASK 13513 127.0.0.1:7002",
    // A WAIT on a master demoted by a failover (the CI fault subset's cluster-failover-force found it fatal once).
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
    "ERR max number of clients reached",
    // What a Cluster node says (the fault matrix's connection-limit cell found it fatal once).
    "ERR max number of clients + cluster connections reached"
  ]
  const permanent = [
    "NOPERM this user has no permissions to run the 'role' command",
    "NOPERM User locker has no permissions to run the 'role' command",
    "NOPERM No permissions to access a key",
    "WRONGPASS invalid username-password pair or user is disabled.",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "OOM command not allowed when used memory > 'maxmemory'. script: 8c46c52b, on @user_script:3.",
    "ERR unknown command 'EVALSHA', with args beginning with:",
    "CROSSSLOT Keys in request don't hash to the same slot",
    "ERR Error running script (call to f_8c46c52b): @user_script:3: some error"
  ]

  it("temporary refusals are retryable, by their first word, whatever the server's wording", () => {
    for (const reply of temporary) {
      const error = classify("EVALSHA", new SimpleError(reply))
      assert.isTrue(error.retryable, reply)
      assert.strictEqual(error.kind, "server")
      assert.strictEqual(error.code, reply.split(" ")[0])
      assert.isFalse(error.mayHaveExecuted, "an error reply means the command was refused")
    }
  })

  it("a WAIT that finds its master demoted is a stale view, retried as NOT_MASTER", () => {
    // Redis 7's and Valkey 8's wording (the CI fault subset's cluster-failover-force found it fatal once).
    for (const reply of [
      "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
      "ERR WAIT cannot be used with replica instances. Please also note that if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
      "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."
    ]) {
      const error = classify("WAIT", new SimpleError(reply))
      assert.deepInclude(error, { kind: "server", code: "NOT_MASTER", retryable: true, reply })
    }
  })

  it("everything else fails at once", () => {
    for (const reply of permanent) {
      const error = classify("EVALSHA", new SimpleError(reply))
      assert.isFalse(error.retryable, reply)
      assert.strictEqual(error.reply, reply)
    }
  })

  it("an error raised inside a script may follow the script's own writes: it may have executed", () => {
    // Redis 7.0's and Valkey 8.0's wording for an error a command raised inside a running script.
    const inside = classify(
      "EVALSHA",
      new SimpleError(
        "WRONGTYPE Operation against a key holding the wrong kind of value script: e2667a3183a384cf6b76c649b110695eebbb1ef7, on @user_script:1."
      )
    )
    assert.deepInclude(inside, { code: "WRONGTYPE", retryable: false, mayHaveExecuted: true })
    // Valkey 9.1's wording leaves the SHA1 out.
    const valkey9 = classify(
      "EVALSHA",
      new SimpleError("WRONGTYPE Operation against a key holding the wrong kind of value script: on @user_script:1.")
    )
    assert.deepInclude(valkey9, { code: "WRONGTYPE", retryable: false, mayHaveExecuted: true })
    // Refused before the script ran, or by its own error reply (which writes nothing first).
    for (const reply of [
      "WRONGTYPE Operation against a key holding the wrong kind of value",
      "ERR fencing token must be a positive integer below 2^53"
    ]) {
      assert.isFalse(classify("EVALSHA", new SimpleError(reply)).mayHaveExecuted, reply)
    }
    // A replica refuses a script's first write: nothing was written.
    const readonly = classify(
      "EVALSHA",
      new SimpleError("READONLY You can't write against a read only replica. script: e2667a31, on @user_script:1.")
    )
    assert.deepInclude(readonly, { retryable: true, mayHaveExecuted: false })
  })

  it("connection failures are retryable and say whether the command may have run", () => {
    const offline = classify("EVALSHA", new ClientOfflineError())
    assert.deepInclude(offline, { kind: "connection", retryable: true, mayHaveExecuted: false })
    const closed = classify("EVALSHA", new SocketClosedUnexpectedlyError())
    assert.deepInclude(closed, { kind: "connection", retryable: true, mayHaveExecuted: true })
    const timeout = classify("EVALSHA", new TimeoutError())
    assert.deepInclude(timeout, { kind: "timeout", retryable: true, mayHaveExecuted: true })
    const reset = classify("EVALSHA", Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))
    assert.deepInclude(reset, { kind: "connection", code: "ECONNRESET", retryable: true })
    const refused = classify("connect", Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))
    assert.isTrue(refused.retryable)
    // What commands still waiting get when their client is destroyed (a silent connection replaced).
    const destroyed = classify("EVALSHA", new DisconnectsClientError())
    assert.deepInclude(destroyed, { kind: "connection", code: "DISCONNECTED", retryable: true, mayHaveExecuted: true })
  })

  it("a client closed on purpose is not retried", () => {
    assert.isFalse(classify("EVALSHA", new ClientClosedError()).retryable)
  })
})
