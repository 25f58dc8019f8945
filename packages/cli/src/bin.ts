#!/usr/bin/env node
// The `sage-lock` executable: the command line arguments to `Cli.run`, on Node's platform services.
// `runMain` turns a failure into exit status 1 (the command has already printed why) and Ctrl-C into
// an interruption that still closes the connection.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import * as Cli from "./Cli.ts"

Cli.run(process.argv.slice(2)).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
