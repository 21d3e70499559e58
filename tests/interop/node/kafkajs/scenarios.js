// A kafkajs client run by tests/interop/test_client_matrix.py against a broker: every
// step of tests/interop/SCENARIOS.md with kafkajs's own APIs, then one JSON report.
//
//	node scenarios.js -bootstrap HOST:PORT -topic T -group G [-messages N]
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, CompressionCodecs, CompressionTypes, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')
const driver = require('./driver.cjs')
const { PARTITIONS, RETENTION_MS, message, lateKey, sharesPartitions, sleep, step, txnKeys, waitFor } =
  driver

const CLIENT = 'kafkajs'
const VERSION = require('kafkajs/package.json').version
const DEFAULT_CONFIG_SOURCE = 5 // DescribeConfigs ConfigSource DEFAULT_CONFIG

// kafkajs ships gzip; snappy and lz4 are its plugin codecs. Its zstd plugin, @kafkajs/zstd,
// pins cppzst 2.0.6, whose native build fails against Node 20's C++17 headers.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
}

async function scenario({ bootstrap, topic, group, count }, out, steps) {
  const kafka = new Kafka({
    clientId: `${CLIENT}-scenarios`,
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  })
  // Short heartbeats and fetch waits: members notice a rebalance, and leave, quickly.
  const consumerOf = groupId =>
    kafka.consumer({ groupId, allowAutoTopicCreation: false, heartbeatInterval: 500, maxWaitTimeInMs: 500 })

  const admin = kafka.admin()
  await step('admin', () => admin.connect())
  await steps.run('create_topic', async () => {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: PARTITIONS,
          replicationFactor: 1,
          configEntries: [{ name: 'retention.ms', value: RETENTION_MS }],
        },
      ],
    })
    if (!created) throw new Error(`topic ${topic} already exists`)
  })

  await steps.run('describe_configs', async () => {
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: 2 /* ConfigResourceTypes.TOPIC */, name: topic }],
    })
    for (const resource of described.resources) {
      if (resource.errorCode) throw new Error(`error code ${resource.errorCode}: ${resource.errorMessage}`)
      for (const entry of resource.configEntries) {
        out.topic_configs[entry.configName] = entry.configValue
        out.default_config[entry.configName] =
          entry.isDefault === true || entry.configSource === DEFAULT_CONFIG_SOURCE
      }
    }
  })

  // kafkajs 2's default, DefaultPartitioner, is Java's murmur2 rule (LegacyPartitioner is not).
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await step('producer', () => producer.connect())
  await steps.run('produce', async () => {
    out.codecs = Object.keys(CODECS)
    out.partitioner = 'murmur2'
    out.base_timestamp = driver.baseTimestamp(count)
    for (let i = 0; i < count; i++) {
      const { key, value, origin, timestamp } = message(i, out.base_timestamp)
      const [written] = await producer.send({
        topic,
        acks: -1,
        compression: CODECS[out.codecs[i % out.codecs.length]],
        messages: [{ key, value, headers: { origin }, timestamp: String(timestamp) }],
      })
      out.produced[key] = written.partition
    }
  })
  steps.done('headers', 'timestamps', 'keyed')

  await steps.run('consume_group', async () => {
    const consumer = consumerOf(group)
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    const next = {} // partition -> the offset after the last message read there
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message: { key, value, offset, timestamp, headers } }) => {
        const named = {}
        for (const [name, header] of Object.entries(headers || {})) named[name] = String(header)
        out.consumed[String(key)] = {
          value: String(value),
          partition,
          offset: Number(offset),
          timestamp: Number(timestamp),
          headers: named,
        }
        next[partition] = Number(offset) + 1 // a partition's messages come in offset order
      },
    })
    await waitFor(() => Object.keys(out.consumed).length >= count, `${count} messages`)
    await consumer.commitOffsets(
      Object.entries(next).map(([partition, offset]) => ({
        topic,
        partition: Number(partition),
        offset: String(offset),
      }))
    )
    await consumer.disconnect()
  })

  await steps.run('committed', async () => {
    for (const entry of await admin.fetchOffsets({ groupId: group, topics: [topic] })) {
      for (const { partition, offset } of entry.partitions) out.committed[partition] = Number(offset)
    }
  })

  await steps.run('list_offsets', async () => {
    for (const { partition, high, low } of await admin.fetchTopicOffsets(topic)) {
      out.newest[partition] = Number(high)
      out.oldest[partition] = Number(low)
    }
  })

  // From here on, each partition is read from its offset for the time to its end.
  const start = {}
  await steps.run('offsets_for_time', async () => {
    out.time_target = out.base_timestamp + 1000 * Math.floor(count / 2)
    for (const { partition, offset } of await admin.fetchTopicOffsetsByTimestamp(topic, out.time_target)) {
      // Where Kafka answers -1 (no message that late), kafkajs gives the end offset.
      start[partition] = Number(offset)
      out.offsets_for_time[partition] = start[partition] >= out.newest[partition] ? -1 : start[partition]
    }
  })

  await steps.run('from_timestamp', async () => {
    const reader = consumerOf(`${group}-from-timestamp`)
    await reader.connect()
    await reader.subscribe({ topics: [topic] })
    await reader.run({
      autoCommit: false,
      eachMessage: async ({ message: { key } }) => {
        out.from_timestamp.push(String(key))
      },
    })
    for (const [partition, offset] of Object.entries(start)) {
      reader.seek({ topic, partition: Number(partition), offset: String(offset) })
    }
    const expected = Object.entries(start).reduce((sum, [p, offset]) => sum + out.newest[p] - offset, 0)
    await waitFor(() => out.from_timestamp.length >= expected, `${expected} messages from the time`)
    await reader.disconnect()
  })

  await steps.run('from_latest', async () => {
    const tail = consumerOf(`${group}-latest`)
    await tail.connect()
    await tail.subscribe({ topics: [topic], fromBeginning: false })
    await tail.run({
      eachMessage: async ({ message: { key } }) => {
        out.from_latest.push(String(key))
      },
    })
    for (let i = 0; i < 100 && out.from_latest.length === 0; i++) {
      const key = lateKey(i)
      await producer.send({ topic, acks: -1, messages: [{ key, value: `value-${key}` }] })
      await sleep(200)
    }
    if (out.from_latest.length === 0) throw new Error('the consumer read none of 100 late messages')
    await tail.disconnect()
  })
  await step('producer close', () => producer.disconnect())

  await steps.run('rebalance', async () => {
    const members = [] // { consumer, partitions: its current assignment }
    const join = async () => {
      const member = { consumer: consumerOf(`${group}-trio`), partitions: [] }
      const { consumer } = member
      consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
        member.partitions = [...(payload.memberAssignment[topic] || [])].sort((a, b) => a - b)
      })
      await consumer.connect()
      await consumer.subscribe({ topics: [topic] })
      await consumer.run({ eachMessage: async () => {} })
      members.push(member)
    }
    const settled = async what => {
      await waitFor(() => sharesPartitions(members.map(m => m.partitions)), what)
      return members.map(m => m.partitions)
    }
    await join()
    await join()
    out.group_of_two = await settled('two members to share the partitions')
    await join()
    out.group_of_three = await settled('three members to share the partitions')
    await Promise.all(members.map(m => m.consumer.disconnect()))
  })
  steps.skip(
    'rebalance_consumer_protocol',
    "kafkajs has only the classic group protocol (JoinGroup, SyncGroup), " +
      "not KIP-848's ConsumerGroupHeartbeat"
  )

  await steps.run('list_groups', async () => {
    out.groups = (await admin.listGroups()).groups.map(g => g.groupId)
  })
  await steps.run('describe_group', async () => {
    out.group_state = (await admin.describeGroups([group])).groups[0].state
  })

  // transactions, transaction_offsets, fencing: the transactions of one transactional id
  // on T-txn, the offset one of them commits for group G-txn, and a producer fenced by
  // another that took its transactional id over.
  const txnTopic = `${topic}-txn`
  const txnGroup = `${group}-txn`
  const transactional = () =>
    kafka.producer({
      transactionalId: txnGroup,
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    })
  const sendKeys = (txn, keys) =>
    txn.send({ topic: txnTopic, acks: -1, messages: keys.map(key => ({ key, value: `value-${key}` })) })

  // Its first transaction() asks the coordinator for the transactional id's producer id
  // and epoch (connect() gets a plain idempotent one).
  const txnProducer = transactional()
  await step('transactions', async () => {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: txnTopic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    })
    if (!created) throw new Error(`topic ${txnTopic} already exists`)
    await txnProducer.connect()
    const committed = await txnProducer.transaction()
    await sendKeys(committed, txnKeys('commit'))
    await step('transaction_offsets', () =>
      committed.sendOffsets({
        consumerGroupId: txnGroup,
        topics: [{ topic, partitions: [{ partition: 0, offset: '1' }] }],
      })
    )
    await committed.commit()
    const aborted = await txnProducer.transaction()
    await sendKeys(aborted, txnKeys('abort')) // resolves once the broker acknowledged them
    await aborted.abort()
  })

  await step('fencing', async () => {
    // The successor's first transaction() initialises the transactional id: a new epoch.
    const successor = transactional()
    await successor.connect()
    const after = await successor.transaction()
    out.fenced = await driver.fencedError(async () => {
      const zombie = await txnProducer.transaction()
      await sendKeys(zombie, ['txn-zombie-000'])
      await zombie.commit()
    }, describeError)
    await sendKeys(after, txnKeys('after'))
    await after.commit()
    await successor.disconnect()
  })
  await step('transactional producer close', () => txnProducer.disconnect())

  await step('transaction_offsets', async () => {
    out.transaction_offsets = await driver.untilCommitted(async () => {
      const found = {}
      for (const entry of await admin.fetchOffsets({ groupId: txnGroup, topics: [topic] })) {
        for (const { partition, offset } of entry.partitions) {
          if (Number(offset) >= 0) found[partition] = Number(offset)
        }
      }
      return found
    })
  })

  await step('transactions', async () => {
    // kafkajs's consumer needs a group; its default isolation is read_committed.
    const reader = kafka.consumer({
      groupId: `${txnGroup}-reader`,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 500,
    })
    // Where each partition's reading got to: the batch events count the markers and the
    // aborted records too, which eachMessage never sees.
    const position = {}
    reader.on(reader.events.END_BATCH_PROCESS, ({ payload }) => {
      if (payload.topic !== txnTopic) return
      const next = Number(payload.lastOffset) + 1
      position[payload.partition] = Math.max(position[payload.partition] || 0, next)
    })
    await reader.connect()
    await reader.subscribe({ topics: [txnTopic], fromBeginning: true })
    await reader.run({
      autoCommit: false,
      eachMessage: async ({ message: { key } }) => {
        out.read_committed.push(String(key))
      },
    })
    // kafkajs's admin lists offsets read_committed: the last stable offsets.
    const ends = async () => {
      const found = {}
      for (const { partition, high } of await admin.fetchTopicOffsets(txnTopic)) {
        found[partition] = Number(high)
      }
      return found
    }
    await driver.readToEnd({
      ends,
      positions: () => position,
      read: out.read_committed,
      expected: [...txnKeys('commit'), ...txnKeys('after')],
    })
    await reader.disconnect()
  })
  steps.done('transactions', 'transaction_offsets', 'fencing')

  await steps.run('delete_topic', () => admin.deleteTopics({ topics: [topic] }))
  await step('admin close', () => admin.disconnect())
}

// kafkajs errors name their cause apart from their message, and a broker's error by its type.
function describeError(err) {
  if (!err) return String(err)
  const type = err.type ? ` [${err.type}]` : ''
  return err.cause ? `${err}${type} (caused by ${describeError(err.cause)})` : `${err}${type}`
}

driver.run(CLIENT, VERSION, scenario, describeError)
