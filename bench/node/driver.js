"use strict";

// Benchmark driver for the npm package dynamodb-lock-client (0.7.x) on the v2 AWS SDK.
//
// Speaks the same command line and JSON-lines protocol as the other drivers in bench/, so that the
// orchestrator can run every contender the same way. See README.md next to this file.

// Must be set before the SDK loads: its end-of-support notice is noise on stderr in every run.
process.env.AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE = "1";

const http = require("http");
const util = require("util");
const AWS = require("aws-sdk");
const DynamoDBLockClient = require("dynamodb-lock-client");

const LIBRARY = "dynamodb-lock-client";
const LIBRARY_VERSION = require("dynamodb-lock-client/package.json").version;
const SDK_VERSION = require("aws-sdk/package.json").version;
const REGION = "us-east-1";

// The library does not name its key attribute; "id" is the one in its README's table template.
const PARTITION_KEY = "id";

// Fail-open: the library sends no heartbeats unless asked; its README pairs heartbeatPeriodMs 3e3
// with leaseDurationMs 1e4, so the heartbeat keeps that proportion of whatever lease is given.
const HEARTBEAT_PER_LEASE = 0.3;

// A waiter that is not meant to time out still needs a bound, so that a stuck run ends with an
// error line instead of hanging the orchestrator.
const WAIT_CAP_MS = 600000;

const SCENARIOS = ["uncontended", "contended", "many", "hold", "takeover"];
const MODES = ["fail-closed", "fail-open"];

function now() {
    // libuv reads CLOCK_MONOTONIC for this on Linux, the clock the other drivers use.
    return process.hrtime.bigint();
}

function emit(obj) {
    // BigInt time stamps go out as bare JSON integers: nanoseconds exceed 2^53.
    const line = JSON.stringify(obj, (_, v) => (typeof v === "bigint" ? `@@${v}@@` : v))
        .replace(/"@@(\d+)@@"/g, "$1") + "\n";
    // stdout on a pipe is asynchronous in Node; resolving on the write callback means the line has
    // reached the pipe before anything else happens (an exit, or the orchestrator's kill in hold).
    return new Promise((resolve, reject) =>
        process.stdout.write(line, (err) => (err ? reject(err) : resolve())));
}

async function fail(message) {
    try {
        await emit({ error: message });
    } finally {
        process.exit(1);
    }
}

function usage(message) {
    process.stderr.write(`driver.js: ${message}\n` +
        "usage: node driver.js --endpoint URL --table NAME --scenario S --resource PREFIX\n" +
        "                      [--workers N] [--ops N] --lease-ms L [--hold-ms H] [--hold-max-ms M]\n" +
        "                      [--poll-ms P]\n" +
        "                      [--mode fail-closed|fail-open]\n");
    process.exit(2);
}

function parseArgs(argv) {
    const spec = {
        "--endpoint": "endpoint", "--table": "table", "--scenario": "scenario",
        "--resource": "resource", "--workers": "workers", "--ops": "ops",
        "--lease-ms": "leaseMs", "--hold-ms": "holdMs", "--hold-max-ms": "holdMaxMs",
        "--poll-ms": "pollMs", "--mode": "mode",
    };
    const numeric = new Set(["workers", "ops", "leaseMs", "holdMs", "holdMaxMs", "pollMs"]);
    const args = { workers: 1, ops: 1, holdMs: 0, pollMs: undefined, mode: "fail-closed" };
    for (let i = 0; i < argv.length; i++) {
        let flag = argv[i];
        let value;
        const eq = flag.indexOf("=");
        if (eq > 0) {
            value = flag.slice(eq + 1);
            flag = flag.slice(0, eq);
        } else {
            value = argv[++i];
        }
        const key = spec[flag];
        if (!key) usage(`unknown argument ${flag}`);
        if (value === undefined) usage(`${flag} needs a value`);
        if (numeric.has(key)) {
            if (!/^\d+$/.test(value)) usage(`${flag} must be a non-negative integer`);
            args[key] = Number(value);
        } else {
            args[key] = value;
        }
    }
    for (const key of ["endpoint", "table", "scenario", "resource", "leaseMs"]) {
        if (args[key] === undefined) usage(`missing --${key.replace(/Ms$/, "-ms")}`);
    }
    if (!SCENARIOS.includes(args.scenario)) usage(`--scenario must be one of ${SCENARIOS.join(", ")}`);
    if (!MODES.includes(args.mode)) usage(`--mode must be one of ${MODES.join(", ")}`);
    if (args.holdMaxMs !== undefined && args.holdMaxMs < args.holdMs) {
        usage("--hold-max-ms must not be below --hold-ms");
    }
    if (args.workers < 1 || args.ops < 1 || args.leaseMs < 1) {
        usage("--workers, --ops and --lease-ms must be positive");
    }
    if (args.pollMs === 0) usage("--poll-ms must be positive");
    return args;
}

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

async function ensureTable(ddb, table) {
    let desc;
    try {
        desc = (await ddb.describeTable({ TableName: table }).promise()).Table;
    } catch (err) {
        if (err.code !== "ResourceNotFoundException") throw err;
        try {
            // The README's template: a string hash key and on-demand billing.
            await ddb.createTable({
                TableName: table,
                AttributeDefinitions: [{ AttributeName: PARTITION_KEY, AttributeType: "S" }],
                KeySchema: [{ AttributeName: PARTITION_KEY, KeyType: "HASH" }],
                BillingMode: "PAY_PER_REQUEST",
            }).promise();
        } catch (err2) {
            // Another driver may have created it in the meantime.
            if (err2.code !== "ResourceInUseException") throw err2;
        }
        for (;;) {
            desc = (await ddb.describeTable({ TableName: table }).promise()).Table;
            if (desc.TableStatus === "ACTIVE") break;
            await sleep(200);
        }
    }
    const keys = desc.KeySchema.map((k) => `${k.AttributeName}:${k.KeyType}`).join(",");
    if (keys !== `${PARTITION_KEY}:HASH`) {
        throw new Error(`table ${table} exists with key schema ${keys}, ` +
            `but this driver needs ${PARTITION_KEY}:HASH only`);
    }
}

function buildClient(args, documentClient) {
    const waitCapMs = args.scenario === "takeover"
        ? 10 * args.leaseMs
        : Math.max(10 * args.leaseMs, WAIT_CAP_MS);
    const common = {
        dynamodb: documentClient,
        lockTable: args.table,
        partitionKey: PARTITION_KEY,
    };
    if (args.mode === "fail-closed") {
        // acquirePeriodMs has no default in the library. Without --poll-ms it follows the lease:
        // the README pairs acquirePeriodMs 1e4 with leaseDurationMs 1e4, and the library's
        // fail-open mode waits one lease between attempts.
        const acquirePeriodMs = args.pollMs !== undefined ? args.pollMs : args.leaseMs;
        // retryCount is the only bound on waiting (its default, 1, gives up after one retry).
        const retryCount = Math.ceil(waitCapMs / acquirePeriodMs);
        const client = new DynamoDBLockClient.FailClosed({ ...common, acquirePeriodMs, retryCount });
        return {
            client,
            settings: {
                mode: "fail-closed",
                lease_ms: null,
                lease_note: "fail-closed locks have no lease: a crashed holder's lock is never taken over",
                heartbeat_period_ms: null,
                acquire_period_ms: acquirePeriodMs,
                acquire_period_source: args.pollMs !== undefined ? "--poll-ms" : "--lease-ms (the library has no default)",
                retry_count: retryCount,
                wait_cap_ms: retryCount * acquirePeriodMs,
                requests: "acquire: conditional PutItem, one more per retry; release: conditional DeleteItem; no heartbeats",
            },
        };
    }
    const heartbeatPeriodMs = Math.max(1, Math.round(args.leaseMs * HEARTBEAT_PER_LEASE));
    // Each attempt on a held lock waits one full lease, so the retries are counted in leases.
    const retryCount = Math.ceil(waitCapMs / args.leaseMs);
    const client = new DynamoDBLockClient.FailOpen({
        ...common, leaseDurationMs: args.leaseMs, heartbeatPeriodMs, retryCount,
    });
    return {
        client,
        settings: {
            mode: "fail-open",
            lease_ms: args.leaseMs,
            heartbeat_period_ms: heartbeatPeriodMs,
            trust_local_time: false,
            retry_wait_ms: args.leaseMs,
            retry_wait_note: "fail-open has no poll period: after reading a held lock it waits that lock's leaseDurationMs, then tries once",
            poll_ms_ignored: args.pollMs !== undefined,
            retry_count: retryCount,
            wait_cap_ms: retryCount * args.leaseMs,
            requests: "acquire: consistent GetItem + conditional PutItem, both again per retry; " +
                "release: conditional PutItem (leaseDurationMs 1, item kept); heartbeat: conditional PutItem per held lock per period",
        },
    };
}

class Run {
    constructor(args) {
        this.args = args;
        // The SDK's default agent opens a new connection for every request; keep-alive is AWS's
        // documented recommendation for the v2 SDK and is what the other contenders do.
        this.agent = new http.Agent({ keepAlive: true });
        this.ddb = this.dynamodb("test");
        // The client of `hold` and `takeover`, and of the table's setup.
        this.shared = this.lockClient(this.ddb);
        this.lockSettings = this.shared.settings;
        this.lockClients = 1;
        this.callers = "one access key: test";
    }

    // An SDK client signing with the access key `accessKey`, over the one keep-alive agent.
    dynamodb(accessKey) {
        return new AWS.DynamoDB({
            endpoint: this.args.endpoint,
            region: REGION,
            credentials: new AWS.Credentials(accessKey, "test"),
            httpOptions: { agent: this.agent },
        });
    }

    lockClient(ddb) {
        const documentClient = new AWS.DynamoDB.DocumentClient({ service: ddb });
        const built = buildClient(this.args, documentClient);
        return {
            settings: built.settings,
            acquireLock: util.promisify(built.client.acquireLock.bind(built.client)),
        };
    }

    // One lock client per worker, each over an SDK client signing with the access key
    // worker<i>, by which the orchestrator's proxy tells the workers' requests apart (the
    // endpoint does not: -sharedDb). The library's client keeps only its configuration, and
    // every acquireLock call carries its own state, so a client per worker changes nothing else;
    // all share the keep-alive agent.
    workerClients(count) {
        this.lockClients = count;
        this.callers = "one access key per worker: worker<i>";
        return Array.from({ length: count }, (_, i) => this.lockClient(this.dynamodb(`worker${i}`)));
    }

    settings(workers) {
        return {
            library: LIBRARY,
            library_version: LIBRARY_VERSION,
            aws_sdk_version: SDK_VERSION,
            scenario: this.args.scenario,
            workers,
            lock_clients: this.lockClients,
            callers: this.callers,
            partition_key: PARTITION_KEY,
            http_keep_alive: true,
            ...this.lockSettings,
        };
    }

    async acquire(resource, client = this.shared) {
        const lock = await client.acquireLock(resource);
        const state = { released: false, lost: null };
        // A fail-open lock emits "error" when a heartbeat fails; with no listener Node would throw.
        // Before release that means the lock may be gone; after release it is a heartbeat that was
        // in flight when release was called, which the library does not wait for.
        lock.on("error", (err) => {
            if (!state.released) {
                state.lost = err;
            } else {
                process.stderr.write(`${LIBRARY}: heartbeat failed after release on ${resource}: ${err.message}\n`);
            }
        });
        return { lock, state, resource };
    }

    async release(held) {
        held.state.released = true;
        await util.promisify(held.lock.release.bind(held.lock))();
        if (held.state.lost) {
            throw new Error(`heartbeat failed while the lock on ${held.resource} was held: ${held.state.lost.message}`);
        }
    }

    close() {
        this.agent.destroy();
    }
}

// After its ready line the driver waits for a line `go` on stdin, so that the orchestrator counts
// the timed work's requests only, none of the setup's.
function waitForGo() {
    return new Promise((resolve, reject) => {
        let buffered = "";
        const onData = (chunk) => {
            buffered += chunk;
            const end = buffered.indexOf("\n");
            if (end < 0) return;
            process.stdin.off("data", onData);
            process.stdin.pause();
            const line = buffered.slice(0, end).trim();
            if (line === "go") resolve();
            else reject(new Error(`expected go on stdin, got ${JSON.stringify(line)}`));
        };
        process.stdin.setEncoding("utf8");
        process.stdin.on("data", onData);
        process.stdin.resume();
    });
}

// Milliseconds that worker `worker` holds its `op`-th acquisition (from 0): --hold-ms, or with
// --hold-max-ms M, --hold-ms + ((7 op + 11 worker) mod (M - --hold-ms + 1)), the sequence every
// driver follows.
function holdOf(args, worker, op) {
    const most = args.holdMaxMs === undefined ? args.holdMs : args.holdMaxMs;
    return args.holdMs + ((7 * op + 11 * worker) % (most - args.holdMs + 1));
}

async function runWorkers(run, resources) {
    const args = run.args;
    const clients = run.workerClients(resources.length);
    await emit({ ready: true, settings: run.settings(resources.length) });
    await waitForGo();
    const worker = async (i) => {
        const resource = resources[i];
        for (let n = 0; n < args.ops; n++) {
            const t0 = now();
            const held = await run.acquire(resource, clients[i]);
            const t1 = now();
            const hold = holdOf(args, i, n);
            if (hold > 0) await sleep(hold);
            const t2 = now();
            await run.release(held);
            const t3 = now();
            await emit({
                worker: i, resource, wait_start_ns: t0, acquired_ns: t1,
                release_start_ns: t2, released_ns: t3,
            });
        }
    };
    await Promise.all(resources.map((_, i) =>
        worker(i).catch((err) => fail(`worker ${i} on ${resources[i]}: ${describe(err)}`))));
}

async function runHold(run) {
    const resource = `${run.args.resource}/0`;
    await emit({ ready: true, settings: run.settings(1) });
    await waitForGo();
    const held = await run.acquire(resource);
    await emit({ acquired_ns: now() });
    held.lock.on("error", (err) => fail(`heartbeat failed while holding ${resource}: ${describe(err)}`));
    // Fail-open heartbeat timers keep the process alive by themselves, fail-closed has none; either
    // way the orchestrator ends this process with SIGKILL.
    setInterval(() => {}, 1 << 30);
    await new Promise(() => {});
}

async function runTakeover(run) {
    const resource = `${run.args.resource}/0`;
    await emit({ ready: true, settings: run.settings(1) });
    await waitForGo();
    let held;
    try {
        held = await run.acquire(resource);
    } catch (err) {
        if (run.args.mode === "fail-closed") {
            throw new Error(`${describe(err)}; fail-closed locks are never taken over after a crash, by design`);
        }
        throw err;
    }
    await emit({ acquired_ns: now() });
    await run.release(held);
}

function describe(err) {
    if (err && err.code) {
        const inner = err.originalError ? ` (${err.originalError.code || err.originalError.message})` : "";
        return `${err.code}: ${err.message}${inner}`;
    }
    return String(err && err.message ? err.message : err);
}

async function main() {
    const args = parseArgs(process.argv.slice(2));
    let run;
    try {
        run = new Run(args);
        await ensureTable(run.ddb, args.table);
        switch (args.scenario) {
            case "uncontended":
                await runWorkers(run, [`${args.resource}/0`]);
                break;
            case "contended":
                await runWorkers(run, Array.from({ length: args.workers }, () => `${args.resource}/0`));
                break;
            case "many":
                await runWorkers(run, Array.from({ length: args.workers }, (_, i) => `${args.resource}/${i}`));
                break;
            case "hold":
                await runHold(run);
                break;
            case "takeover":
                await runTakeover(run);
                break;
        }
    } catch (err) {
        await fail(describe(err));
    }
    // Released locks leave no heartbeat timers behind; the keep-alive sockets are all that is left.
    run.close();
    process.exit(0);
}

main();
