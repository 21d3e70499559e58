// kafkajs's admin API against a broker: every scenario of tests/admin/test_admin_kafkajs.py
// in one run, each on its own, all at once.
//
// Usage: node admin.cjs SETTINGS.json
// SETTINGS is {"scenarios": [{name, kind, bootstrap, ...}, ...]}; the kinds:
//   "assign" {topic, assignment: [[partition, [replicas]]...], missing}: createTopics with
//     the replica assignment, read back with fetchTopicMetadata; then a topic placed on
//     the broker `missing` (which does not exist), whose refusal is the data.
//   "reassign" {topic, assignment, target: [[partition, [replicas]]...], missing}: the topic
//     placed by hand, alterPartitionReassignments to `target`, listPartitionReassignments
//     until nothing is listed, fetchTopicMetadata; then a move onto `missing`, refused.
//   "configs" {node, other, config, value}: alterConfigs on BROKER `node`, then
//     describeConfigs (with synonyms) of `config` on `node` and on `other` until `node`
//     shows `value` (Kafka applies it through its metadata log); then the node's dynamic
//     configs are cleared again (alterConfigs with none).
//   "oauth" {topic, subject, scope}: an admin and a producer signed in with an unsecured
//     JWS token (alg none) carrying `scope`: create the topic, send one record, read the
//     topic's high watermark; or the refusal.
// Prints to stdout, one JSON object a line:
// {"scenario": NAME, "ok": bool, "error": {name, type, message, errors?} or null, "data": {...},
//  "seconds": n}.
'use strict'

const fs = require('fs')
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

const SCENARIO_MS = 25000 // the outer bound on one scenario
const CALL_MS = 8000

// kafkajs logs to stdout by default, where the report goes: its warnings go to stderr.
const logCreator = () => ({ namespace, level, label, log }) => {
  if (level > logLevel.WARN) return
  const { message, ...extra } = log
  process.stderr.write(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

function client(scenario, role, sasl) {
  return new Kafka({
    clientId: `admin-${scenario.name}-${role}`,
    brokers: scenario.bootstrap.split(','),
    connectionTimeout: CALL_MS,
    authenticationTimeout: CALL_MS,
    requestTimeout: CALL_MS,
    // Kafka applies a change through its metadata log: a call just after may retry.
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.WARN,
    logCreator,
    sasl,
  })
}

// kafkajs's error as the test reads it: its class, Kafka's error name, its text, and
// those it gathers (a topic creation's errors, one per topic).
function described(error) {
  if (error == null) return null
  const seen = { name: error.name, type: error.type || null, message: error.message }
  if (Array.isArray(error.errors)) seen.errors = error.errors.map(described)
  if (error.cause) seen.cause = described(error.cause)
  return seen
}

async function refusal(call) {
  try {
    await call()
    return null
  } catch (error) {
    return described(error)
  }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

const placement = pairs => pairs.map(([partition, replicas]) => ({ partition, replicas }))

// partition -> [leader, replicas, isr], as fetchTopicMetadata reports them.
async function partitions(admin, topic) {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
  const placed = {}
  for (const p of topics[0].partitions) placed[p.partitionId] = [p.leader, p.replicas, p.isr]
  return placed
}

// createTopics, then its partitions' leaders. kafkajs's own wait (waitForLeaders) gives
// up on UNKNOWN_TOPIC_OR_PARTITION, which Kafka answers until its metadata has the topic.
async function create(admin, topics) {
  const created = await admin.createTopics({ topics, waitForLeaders: false })
  for (const { topic } of topics) {
    for (;;) {
      try {
        const placed = await partitions(admin, topic)
        if (Object.values(placed).every(([leader]) => leader >= 0)) break
      } catch (error) {
        const cause = error.originalError || error
        if (cause.type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error
      }
      await sleep(100)
    }
  }
  return created
}

async function withAdmin(scenario, run, sasl) {
  const admin = client(scenario, 'admin', sasl).admin()
  await admin.connect()
  try {
    return await run(admin)
  } finally {
    await admin.disconnect()
  }
}

async function assign(scenario, data) {
  await withAdmin(scenario, async admin => {
    const { topic, assignment, missing } = scenario
    data.created = await create(admin, [{ topic, replicaAssignment: placement(assignment) }])
    data.partitions = await partitions(admin, topic)
    data.refused = await refusal(() =>
      admin.createTopics({
        topics: [{ topic: `${topic}-missing`, replicaAssignment: placement([[0, [missing]]]) }],
      })
    )
  })
}

async function reassign(scenario, data) {
  await withAdmin(scenario, async admin => {
    const { topic, assignment, target, missing } = scenario
    data.step = 'create'
    await create(admin, [{ topic, replicaAssignment: placement(assignment) }])
    data.step = 'alter'
    await admin.alterPartitionReassignments({
      topics: [{ topic, partitionAssignment: placement(target) }],
    })
    // What is listed while the move is under way, then nothing once it is done.
    data.listed = []
    data.step = 'list'
    for (;;) {
      const { topics } = await admin.listPartitionReassignments({
        topics: [{ topic, partitions: target.map(([partition]) => partition) }],
      })
      const moving = topics.flatMap(t => t.partitions.map(p => [t.name, p]))
      if (moving.length === 0) break
      if (data.listed.length === 0) data.listed = moving
      await sleep(200)
    }
    // Kafka's metadata catches up with a finished move a moment later.
    const wanted = JSON.stringify(target.map(([, replicas]) => replicas))
    data.step = 'metadata'
    for (;;) {
      data.partitions = await partitions(admin, topic)
      const now = target.map(([partition]) => data.partitions[partition][1])
      if (JSON.stringify(now) === wanted) break
      await sleep(200)
    }
    data.refused = await refusal(() =>
      admin.alterPartitionReassignments({
        topics: [{ topic, partitionAssignment: placement([[0, [missing]]]) }],
      })
    )
  })
}

// config name -> [value, source, [[synonym, value, source]...]] on BROKER `node`.
async function brokerConfig(admin, node, name) {
  const { resources } = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.BROKER, name: String(node), configNames: [name] }],
    includeSynonyms: true,
  })
  const [entry] = resources[0].configEntries
  return [
    entry.configValue,
    entry.configSource,
    entry.configSynonyms.map(s => [s.configName, s.configValue, s.configSource]),
  ]
}

async function configs(scenario, data) {
  await withAdmin(scenario, async admin => {
    const { node, other, config: name, value } = scenario
    const broker = String(node)
    data.altered = await admin.alterConfigs({
      resources: [
        { type: ConfigResourceTypes.BROKER, name: broker, configEntries: [{ name, value }] },
      ],
    })
    try {
      for (;;) {
        data.node = await brokerConfig(admin, node, name)
        if (data.node[0] === value) break
        await sleep(200)
      }
      if (other != null) data.other = await brokerConfig(admin, other, name)
    } finally {
      // AlterConfigs replaces a broker's dynamic configs: none leaves none.
      await admin.alterConfigs({
        resources: [{ type: ConfigResourceTypes.BROKER, name: broker, configEntries: [] }],
      })
    }
    for (;;) {
      data.cleared = await brokerConfig(admin, node, name)
      if (data.cleared[0] !== value) break
      await sleep(200)
    }
  })
}

// An unsecured JWS (RFC 7515 with alg "none"): header and claims, no signature.
function unsecuredToken(claims) {
  const part = value => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${part({ alg: 'none' })}.${part(claims)}.`
}

async function oauth(scenario, data) {
  const { topic, subject, scope } = scenario
  const now = Math.floor(Date.now() / 1000)
  const sasl = {
    mechanism: 'oauthbearer',
    oauthBearerProvider: async () => ({
      value: unsecuredToken({ sub: subject, iat: now, exp: now + 3600, scope }),
    }),
  }
  await withAdmin(
    scenario,
    async admin => {
      await create(admin, [{ topic, numPartitions: 1 }])
      const producer = client(scenario, 'producer', sasl).producer()
      await producer.connect()
      try {
        await producer.send({ topic, acks: -1, messages: [{ value: 'signed-in' }] })
      } finally {
        await producer.disconnect()
      }
      data.offsets = await admin.fetchTopicOffsets(topic)
    },
    sasl
  )
}

const KINDS = { assign, reassign, configs, oauth }

function bounded(promise, ms, what) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

async function run(scenario) {
  const data = {}
  const started = Date.now()
  let error = null
  try {
    await bounded(KINDS[scenario.kind](scenario, data), SCENARIO_MS, scenario.name)
  } catch (e) {
    error = described(e)
  }
  process.stdout.write(
    `${JSON.stringify({
      scenario: scenario.name,
      ok: error === null,
      error,
      data,
      seconds: (Date.now() - started) / 1000,
    })}\n`
  )
}

async function main() {
  const { scenarios } = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  await Promise.all(scenarios.map(run))
}

main().then(
  () => process.exit(0),
  error => {
    process.stderr.write(`${error.stack}\n`)
    process.exit(1)
  }
)
