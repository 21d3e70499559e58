// A kafkajs client run by tests/interop/test_client_matrix.py against a broker.
//
//	node scenarios.js -bootstrap HOST:PORT -topic T -group G [-messages N]
//
// The same scenario as tests/interop/go/sarama/main.go: it creates the topic, produces
// keyed gzip messages, consumes them in a consumer group, commits, and prints one JSON
// object with what it saw; the test checks it against the broker.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')
const { run, step } = require('./driver.cjs')

const CLIENT = 'kafkajs'
const VERSION = '2.2.4'
const PARTITIONS = 3
const DEFAULT_CONFIG_SOURCE = 5 // DescribeConfigs ConfigSource DEFAULT_CONFIG

async function scenario({ bootstrap, topic, group, count }, out) {

  const kafka = new Kafka({
    clientId: `${CLIENT}-scenarios`,
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  })

  const admin = kafka.admin()
  await step('admin', () => admin.connect())
  await step('create topic', async () => {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: PARTITIONS,
          replicationFactor: 1,
          configEntries: [{ name: 'retention.ms', value: '3600000' }],
        },
      ],
    })
    if (!created) throw new Error(`topic ${topic} already exists`)
  })
  await step('describe configs', async () => {
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2 /* ConfigResourceTypes.TOPIC */, name: topic }],
    })
    for (const resource of described.resources) {
      if (resource.errorCode) {
        throw new Error(`error code ${resource.errorCode}: ${resource.errorMessage}`)
      }
      for (const entry of resource.configEntries) {
        out.topic_configs[entry.configName] = entry.configValue
        out.default_config[entry.configName] =
          entry.isDefault === true || entry.configSource === DEFAULT_CONFIG_SOURCE
      }
    }
  })

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await step('producer', () => producer.connect())
  for (let i = 0; i < count; i++) {
    const key = `key-${String(i).padStart(3, '0')}`
    const metadata = await step('produce', () =>
      producer.send({
        topic,
        acks: -1,
        compression: CompressionTypes.GZIP,
        messages: [{ key, value: `value-${key}`, headers: { origin: `header-${key}` } }],
      })
    )
    out.produced[key] = metadata[0].partition
  }
  await step('producer close', () => producer.disconnect())

  const consumer = kafka.consumer({ groupId: group, allowAutoTopicCreation: false })
  await step('consumer group', () => consumer.connect())
  await step('subscribe', () => consumer.subscribe({ topics: [topic], fromBeginning: true }))
  const nextOffsets = {} // partition -> offset after the last message consumed there
  let finished
  const complete = new Promise(resolve => {
    finished = resolve
  })
  if (count === 0) finished()
  await step('consume', () =>
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const key = message.key.toString()
        out.consumed[key] = message.value.toString()
        for (const [name, value] of Object.entries(message.headers || {})) {
          if (name === 'origin') out.headers[key] = Buffer.from(value).toString()
        }
        const next = BigInt(message.offset) + 1n
        if (nextOffsets[partition] === undefined || next > nextOffsets[partition]) {
          nextOffsets[partition] = next
        }
        if (Object.keys(out.consumed).length === count) finished()
      },
    })
  )
  await complete
  await step('commit', () =>
    consumer.commitOffsets(
      Object.entries(nextOffsets).map(([partition, offset]) => ({
        topic,
        partition: Number(partition),
        offset: offset.toString(),
      }))
    )
  )
  await step('consumer group close', () => consumer.disconnect())

  await step('list consumer group offsets', async () => {
    const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    for (const entry of offsets) {
      if (entry.topic !== topic) continue
      for (const { partition, offset } of entry.partitions) {
        if (partition < PARTITIONS) out.committed[partition] = Number(offset)
      }
    }
  })
  await step('newest offset', async () => {
    const offsets = await admin.fetchTopicOffsets(topic)
    for (const { partition, high, low } of offsets) {
      if (partition >= PARTITIONS) continue
      out.newest[partition] = Number(high)
      out.oldest[partition] = Number(low)
    }
  })
  await step('list groups', async () => {
    const listed = await admin.listGroups()
    out.groups = listed.groups.map(g => g.groupId).sort()
  })
  await step('describe groups', async () => {
    const described = await admin.describeGroups([group])
    out.group_state = described.groups[0].state
  })
  await step('delete topic', () => admin.deleteTopics({ topics: [topic] }))
  await step('admin close', () => admin.disconnect())
}

// kafkajs errors name their cause apart from their message.
run(CLIENT, VERSION, scenario, err => (err && err.cause ? `${err} (caused by ${err.cause})` : String(err)))
