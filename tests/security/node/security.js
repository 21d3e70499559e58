// kafkajs against the broker's security listeners: every scenario of
// tests/security/test_jvm_node_clients.py in one run, all at once.
//
// Usage: node security.js SETTINGS.json
// SETTINGS is {"scenarios": [{name, kind, bootstrap, protocol, mechanism?, username?,
// password?, ca?, topic?, count?}, ...]}, as SecurityScenarios.java takes them:
//   kind "round_trip": create `topic`, produce `count` records with acks=all, read them
//     back from the earliest offset; the data is the values read.
//   kind "refused": a producer and an admin client each try to connect; the data is
//     what each failed with (or that it connected).
// Prints to stdout, one JSON object a line: {"start": NAME} as a scenario starts, then
// {"scenario": NAME, "ok": bool, "error": text-or-null, "data": {...}, "seconds": n}.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const SCENARIO_MS = 40000 // the outer bound on one scenario
const CALL_MS = 8000 // how long one connection attempt or request may take

// kafkajs logs to stdout by default, where the report goes: its warnings go to stderr.
function logCreator() {
  return ({ namespace, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

function client(scenario, role) {
  const config = {
    clientId: `security-${scenario.name}-${role}`,
    brokers: [scenario.bootstrap],
    connectionTimeout: CALL_MS,
    authenticationTimeout: CALL_MS,
    requestTimeout: CALL_MS,
    // A refusal is final: one more attempt at most, soon.
    retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500 },
    logLevel: logLevel.WARN,
    logCreator,
  }
  if (scenario.protocol === 'SSL' || scenario.protocol === 'SASL_SSL') {
    // Node verifies the server's certificate against the CA and the address it dialled.
    config.ssl = { ca: [fs.readFileSync(scenario.ca, 'utf8')] }
  }
  if (scenario.mechanism) {
    config.sasl = {
      mechanism: scenario.mechanism.toLowerCase(),
      username: scenario.username,
      password: scenario.password,
    }
  }
  return new Kafka(config)
}

async function roundTrip(scenario, data) {
  const { topic, count } = scenario
  const admin = client(scenario, 'admin').admin()
  await admin.connect()
  try {
    await admin.createTopics({
      topics: [{ topic, numPartitions: 1, replicationFactor: 1 }],
      waitForLeaders: true,
    })
  } finally {
    await admin.disconnect()
  }

  const producer = client(scenario, 'producer').producer()
  await producer.connect()
  try {
    const messages = [...Array(count).keys()].map(i => ({ value: `${topic}-${i}` }))
    await producer.send({ topic, acks: -1, messages })
  } finally {
    await producer.disconnect()
  }

  const values = []
  data.values = values
  const consumer = client(scenario, 'consumer').consumer({ groupId: `${topic}-group` })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let done
    const all = new Promise(resolve => (done = resolve))
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        if (values.length >= count) done()
      },
    })
    await bounded(all, 20000, `reading ${count} records back`)
  } finally {
    await consumer.disconnect()
  }
}

async function refused(scenario, data) {
  const producer = client(scenario, 'producer').producer()
  data.producer = await outcome(() => producer.connect(), () => producer.disconnect())
  const admin = client(scenario, 'admin').admin()
  data.admin = await outcome(() => admin.connect(), () => admin.disconnect())
}

// {failed: false} or {failed: true, name, message, chain} of the error `attempt` ended
// with; `chain` is that error and every error it wraps, outermost first.
async function outcome(attempt, cleanup) {
  try {
    await attempt()
    return { failed: false }
  } catch (err) {
    return { failed: true, name: err.name, message: err.message, chain: chain(err) }
  } finally {
    await cleanup().catch(() => {})
  }
}

function chain(err) {
  const out = []
  for (let e = err; e && out.length < 6; e = e.cause || e.originalError) {
    out.push({ name: e.name, message: e.message })
  }
  return out
}

function bounded(promise, ms, what) {
  let timer
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms / 1000} s`)), ms)
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}

function emit(line) {
  process.stdout.write(JSON.stringify(line) + '\n')
}

async function runOne(scenario) {
  emit({ start: scenario.name })
  const started = process.hrtime.bigint()
  const data = {}
  let error = null
  try {
    const body = { round_trip: roundTrip, refused }[scenario.kind]
    if (!body) throw new Error(`no scenario kind ${scenario.kind}`)
    await bounded(body(scenario, data), SCENARIO_MS, 'the scenario')
  } catch (err) {
    error = chain(err)
      .map((e, i) => `${i ? 'caused by ' : ''}${e.name}: ${e.message}`)
      .join('\n')
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  emit({ scenario: scenario.name, ok: error === null, error, data, seconds })
}

async function main() {
  const { scenarios } = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  await Promise.all(scenarios.map(runOne))
}

main().then(
  // Clients a timed-out scenario left behind must not keep the process alive.
  () => process.stdout.write('', () => process.exit(0)),
  err => {
    process.stderr.write(`security.js: ${err.stack || err}\n`, () => process.exit(1))
  }
)
