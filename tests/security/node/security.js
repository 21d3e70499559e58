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
//   kinds "acl_*": the steps of one story on a broker enforcing ACLs (below), run in the
//     order given, one after another, beside the others. They also take topic, group and
//     count, {admin,allowed,refused}_{user,password} (the super user, the principal the
//     grants name, one with no grant), grants (the ACLs to create) and revoke (the one to
//     delete), each ACL [type, name, pattern, principal, host, operation, permission] as
//     Kafka names them.
// Prints to stdout, one JSON object a line: {"start": NAME} as a scenario starts, then
// {"scenario": NAME, "ok": bool, "error": text-or-null, "data": {...}, "seconds": n}.
'use strict'

const fs = require('fs')
const {
  Kafka,
  logLevel,
  AclResourceTypes,
  AclOperationTypes,
  AclPermissionTypes,
  ResourcePatternTypes,
} = require('kafkajs')

const SCENARIO_MS = 40000 // the outer bound on one scenario
const CALL_MS = 8000 // how long one connection attempt or request may take

// kafkajs logs to stdout by default, where the report goes: its warnings go to stderr.
// With `seen`, debug entries are read too, and the type of each Kafka error they carry
// is added to it (kafkajs logs some errors it then replaces with its own).
function logCreator(seen) {
  return () =>
    ({ namespace, level, label, log }) => {
      const { message, ...extra } = log
      if (seen && extra.error && extra.error.type) seen.push(extra.error.type)
      if (level > logLevel.WARN) return
      process.stderr.write(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
    }
}

function client(scenario, role, user = scenario.username, password = scenario.password, seen) {
  const config = {
    clientId: `security-${scenario.name}-${role}`,
    brokers: [scenario.bootstrap],
    connectionTimeout: CALL_MS,
    authenticationTimeout: CALL_MS,
    requestTimeout: CALL_MS,
    // A refusal is final: one more attempt at most, soon.
    retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500 },
    logLevel: seen ? logLevel.DEBUG : logLevel.WARN,
    logCreator: logCreator(seen),
  }
  if (scenario.protocol === 'SSL' || scenario.protocol === 'SASL_SSL') {
    // Node verifies the server's certificate against the CA and the address it dialled.
    config.ssl = { ca: [fs.readFileSync(scenario.ca, 'utf8')] }
  }
  if (scenario.mechanism) {
    config.sasl = { mechanism: scenario.mechanism.toLowerCase(), username: user, password }
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

// --- the ACL story ---
// Its steps, in order: the super user grants alice what she needs (and reads the ACLs
// back); alice is served; bob, with no grant, is refused as a producer, as a consumer and
// when he asks for the group's offsets; the super user deletes alice's WRITE, and alice's
// next send is refused.

const story = {
  allowedProducer: null, // alice's, kept from the step that serves her to the revoking one
}

function as(scenario, role, who, seen) {
  const user = scenario[`${who}_user`]
  return client(scenario, `${role}-${user}`, user, scenario[`${who}_password`], seen)
}

const ACL_ENUMS = [
  AclResourceTypes,
  null,
  ResourcePatternTypes,
  null,
  null,
  AclOperationTypes,
  AclPermissionTypes,
]

// [type, name, pattern, principal, host, operation, permission] -> kafkajs's ACL object
function binding([type, name, pattern, principal, host, operation, permission]) {
  return {
    resourceType: AclResourceTypes[type],
    resourceName: name,
    resourcePatternType: ResourcePatternTypes[pattern],
    principal,
    host,
    operation: AclOperationTypes[operation],
    permissionType: AclPermissionTypes[permission],
  }
}

// kafkajs's ACL fields (numbers) -> [type, name, pattern, ...] as Kafka names them
function fields(acl) {
  const values = [
    acl.resourceType,
    acl.resourceName,
    acl.resourcePatternType,
    acl.principal,
    acl.host,
    acl.operation,
    acl.permissionType,
  ]
  return values.map((value, i) => {
    const names = ACL_ENUMS[i]
    if (!names) return value
    const found = Object.keys(names).find(key => names[key] === value)
    return found === undefined ? `unknown ${value}` : found
  })
}

async function withAdmin(scenario, body) {
  const admin = as(scenario, 'admin', 'admin').admin()
  await admin.connect()
  try {
    return await body(admin)
  } finally {
    await admin.disconnect()
  }
}

// The super user creates the grants and describes every ACL (filter: any); the data is
// what it read back.
async function aclAdmin(scenario, data) {
  await withAdmin(scenario, async admin => {
    await admin.createAcls({ acl: scenario.grants.map(binding) })
    const { resources } = await admin.describeAcls({
      resourceType: AclResourceTypes.ANY,
      resourcePatternType: ResourcePatternTypes.ANY,
      operation: AclOperationTypes.ANY,
      permissionType: AclPermissionTypes.ANY,
    })
    data.described = resources.flatMap(resource =>
      resource.acls.map(entry => fields({ ...resource, ...entry }))
    )
  })
}

// alice sends `count` records with acks=all, reads them back in the group and commits;
// the data is the values read and the group's committed offset as she then fetches it.
async function aclServed(scenario, data) {
  const { topic, group, count } = scenario
  const producer = as(scenario, 'producer', 'allowed').producer()
  story.allowedProducer = producer
  await producer.connect()
  const messages = [...Array(count).keys()].map(i => ({ value: `${topic}-${i}` }))
  await producer.send({ topic, acks: -1, messages })

  const values = []
  data.values = values
  const kafka = as(scenario, 'consumer', 'allowed')
  // A short fetch wait: disconnecting waits for the fetch in flight.
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let done
    const all = new Promise(resolve => (done = resolve))
    let next = null
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        next = (BigInt(message.offset) + 1n).toString()
        if (values.length >= count) done()
      },
    })
    await bounded(all, 20000, `reading ${count} records back`)
    await consumer.commitOffsets([{ topic, partition: 0, offset: next }])
  } finally {
    await consumer.disconnect()
  }
  const admin = kafka.admin()
  await admin.connect()
  try {
    const [fetched] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    const [partition] = fetched.partitions
    data.committed = Number(partition.offset)
  } finally {
    await admin.disconnect()
  }
}

// bob, with no grant, sends one record to the topic; then the super user reads the
// topic's end offset.
async function aclProduceRefused(scenario, data) {
  const producer = as(scenario, 'producer', 'refused').producer()
  data.producer = await outcome(
    async () => {
      await producer.connect()
      await producer.send({ topic: scenario.topic, acks: -1, messages: [{ value: 'v' }] })
    },
    () => producer.disconnect()
  )
  data.end_offset = await endOffset(scenario)
}

async function endOffset(scenario) {
  return withAdmin(scenario, async admin => {
    const [partition] = await admin.fetchTopicOffsets(scenario.topic)
    return Number(partition.high)
  })
}

// bob, with no grant, reads the topic in the group; the data is what that failed with
// (or that he read a record within the bound). Then he asks for the group's committed
// offsets, which looks the group up first: kafkajs reports a failed look-up as
// KafkaJSGroupCoordinatorNotFound, and logs the broker's error, whose type is kept.
async function aclConsumeRefused(scenario, data) {
  const consumer = as(scenario, 'consumer', 'refused').consumer({ groupId: scenario.group })
  data.consumer = await outcome(
    async () => {
      await consumer.connect()
      await consumer.subscribe({ topic: scenario.topic, fromBeginning: true })
      let failed
      const crashed = new Promise((_, reject) => (failed = reject))
      consumer.on(consumer.events.CRASH, ({ payload }) => failed(payload.error))
      let read
      const first = new Promise(resolve => (read = resolve))
      await consumer.run({ autoCommit: false, eachMessage: async () => read() })
      await bounded(Promise.race([first, crashed]), 15000, 'reading a record')
    },
    () => consumer.disconnect()
  )
  const seen = []
  const admin = as(scenario, 'admin', 'refused', seen).admin()
  data.offsets = await outcome(
    async () => {
      await admin.connect()
      await admin.fetchOffsets({ groupId: scenario.group, topics: [scenario.topic] })
    },
    () => admin.disconnect()
  )
  data.offsets.logged = seen
}

// The super user deletes alice's WRITE with a filter that matches exactly it; the data is
// what the deletion reports, then what alice's next send (through her producer) ends with,
// and the topic's end offset after it.
async function aclDeleted(scenario, data) {
  await withAdmin(scenario, async admin => {
    const { filterResponses } = await admin.deleteAcls({ filters: [binding(scenario.revoke)] })
    data.deleted = filterResponses.flatMap(response => response.matchingAcls.map(fields))
  })
  let producer = story.allowedProducer
  if (!producer) {
    producer = as(scenario, 'producer', 'allowed').producer()
    story.allowedProducer = producer
  }
  data.producer = await outcome(async () => {
    await producer.connect()
    const messages = [{ value: 'after-revoke' }]
    await producer.send({ topic: scenario.topic, acks: -1, messages })
  })
  data.end_offset = await endOffset(scenario)
}

async function aclStory(scenarios) {
  try {
    for (const scenario of scenarios) await runOne(scenario)
  } finally {
    if (story.allowedProducer) await story.allowedProducer.disconnect().catch(() => {})
  }
}

// {failed: false} or {failed: true, name, type, message, chain} of the error `attempt`
// ended with (`type`: a KafkaJSProtocolError's Kafka error); `chain` is that error and
// every error it wraps, outermost first.
async function outcome(attempt, cleanup = async () => {}) {
  try {
    await attempt()
    return { failed: false }
  } catch (err) {
    const { name, type, message } = err
    return { failed: true, name, type, message, chain: chain(err) }
  } finally {
    await cleanup().catch(() => {})
  }
}

function chain(err) {
  const out = []
  for (let e = err; e && out.length < 6; e = e.cause || e.originalError) {
    out.push({ name: e.name, type: e.type, message: e.message })
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
    const body = {
      round_trip: roundTrip,
      refused,
      acl_admin: aclAdmin,
      acl_served: aclServed,
      acl_produce_refused: aclProduceRefused,
      acl_consume_refused: aclConsumeRefused,
      acl_deleted: aclDeleted,
    }[scenario.kind]
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
  // The ACL story's steps build on each other: one after another, in their order.
  const steps = scenarios.filter(s => s.kind.startsWith('acl_'))
  const others = scenarios.filter(s => !s.kind.startsWith('acl_'))
  await Promise.all([...others.map(runOne), aclStory(steps)])
}

main().then(
  // Clients a timed-out scenario left behind must not keep the process alive.
  () => process.stdout.write('', () => process.exit(0)),
  err => {
    process.stderr.write(`security.js: ${err.stack || err}\n`, () => process.exit(1))
  }
)
