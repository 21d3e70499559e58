// A @platformatic/kafka client run by tests/interop/test_client_matrix.py against a
// broker: every step of tests/interop/SCENARIOS.md with its own APIs, then one JSON report.
//
//	node scenarios.mjs -bootstrap HOST:PORT -topic T -group G [-messages N]
//
// @platformatic/kafka asks for Node >= 22 ("engines"); the only newer built-in it calls
// is Promise.withResolvers (Node 22). Supply it on older Node (20), then load the client:
// a static import would run before this line.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers() {
    let resolve, reject
    const promise = new this((res, rej) => {
      resolve = res
      reject = rej
    })
    return { promise, resolve, reject }
  }
}
const { default: zlib } = await import('node:zlib')
const {
  Admin,
  CompressionAlgorithms,
  ConfigResourceTypes,
  ConfigSources,
  Consumer,
  MessagesStreamFallbackModes,
  MessagesStreamModes,
  ProduceAcks,
  Producer,
  stringDeserializers,
  stringSerializers,
} = await import('@platformatic/kafka')
const { default: driver } = await import('./driver.cjs')
const { PARTITIONS, RETENTION_MS, message, lateKey, sharesPartitions, sleep, step, waitFor } = driver

const CLIENT = '@platformatic/kafka'
const VERSION = '2.12.1' // package.json's; the package exports no version
const ALL_PARTITIONS = [...Array(PARTITIONS).keys()]

// Its snappy and lz4 are built in (WebAssembly); zstd is Node's zlib's, from Node 22.15.
const CODECS = [
  CompressionAlgorithms.NONE,
  CompressionAlgorithms.GZIP,
  CompressionAlgorithms.SNAPPY,
  CompressionAlgorithms.LZ4,
  ...(typeof zlib.zstdCompressSync === 'function' ? [CompressionAlgorithms.ZSTD] : []),
]

async function scenario({ bootstrap, topic, group, count }, out, steps) {
  const base = { bootstrapBrokers: [bootstrap], retries: 3 }
  // Short heartbeats and fetch waits: members notice a rebalance, and leave, quickly.
  const consumerOf = (groupId, clientId) =>
    new Consumer({
      ...base,
      clientId,
      groupId,
      deserializers: stringDeserializers,
      autocommit: false,
      maxWaitTime: 500,
      heartbeatInterval: 500,
    })
  const partitionsOf = (listed, pick) => {
    const found = {}
    for (const { name, partitions } of listed) {
      if (name !== topic) continue
      for (const partition of partitions) found[partition.partitionIndex] = pick(partition)
    }
    return found
  }

  const admin = new Admin({ ...base, clientId: 'platformatic-scenarios-admin' })
  await steps.run('create_topic', () =>
    admin.createTopics({
      topics: [topic],
      partitions: PARTITIONS,
      replicas: 1,
      configs: [{ name: 'retention.ms', value: RETENTION_MS }],
    })
  )

  await steps.run('describe_configs', async () => {
    // A real Kafka's metadata knows a topic a moment after creating it; until then,
    // describing it fails (UNKNOWN_TOPIC_OR_PARTITION), and careful callers ask again.
    let described
    for (let attempt = 0; ; attempt++) {
      try {
        described = await admin.describeConfigs({
          resources: [{ resourceType: ConfigResourceTypes.TOPIC, resourceName: topic }],
        })
        break
      } catch (error) {
        if (attempt === 100) throw error
        await sleep(100)
      }
    }
    for (const resource of described) {
      for (const entry of resource.configs) {
        out.topic_configs[entry.name] = entry.value
        out.default_config[entry.name] = entry.configSource === ConfigSources.DEFAULT_CONFIG
      }
    }
  })

  const producer = new Producer({
    ...base,
    clientId: 'platformatic-scenarios-producer',
    serializers: stringSerializers,
    autocreateTopics: false,
  })
  const send = async (record, compression) => {
    const result = await producer.send({
      acks: ProduceAcks.ALL,
      compression,
      messages: [{ topic, ...record }],
    })
    const written = (result.offsets || []).find(entry => entry.topic === topic)
    if (!written) throw new Error('no partition in the produce result')
    return written.partition
  }
  await steps.run('produce', async () => {
    out.codecs = CODECS
    // Its defaultPartitioner: murmur2 taken as unsigned, modulo the partitions; Java's
    // rule (its compatibilityPartitioner) masks the sign bit instead.
    out.partitioner = 'murmur2-unsigned'
    out.base_timestamp = driver.baseTimestamp(count)
    for (let i = 0; i < count; i++) {
      const { key, value, origin, timestamp } = message(i, out.base_timestamp)
      const record = { key, value, headers: { origin }, timestamp: BigInt(timestamp) }
      out.produced[key] = await send(record, CODECS[i % CODECS.length])
    }
  })
  steps.done('headers', 'timestamps', 'keyed')

  await steps.run('consume_group', async () => {
    const consumer = consumerOf(group, 'platformatic-scenarios-consumer')
    const stream = await consumer.consume({
      topics: [topic],
      mode: MessagesStreamModes.COMMITTED,
      fallbackMode: MessagesStreamFallbackModes.EARLIEST,
    })
    const toCommit = new Map() // partition -> { offset, leaderEpoch } to commit
    if (count > 0) {
      for await (const record of stream) {
        out.consumed[record.key] = {
          value: record.value,
          partition: record.partition,
          offset: Number(record.offset),
          timestamp: Number(record.timestamp),
          headers: Object.fromEntries(record.headers),
        }
        // A partition's records come in offset order: its last one is the one to commit after.
        toCommit.set(record.partition, { offset: record.offset + 1n, leaderEpoch: record.leaderEpoch })
        if (Object.keys(out.consumed).length === count) break
      }
    }
    if (Object.keys(out.consumed).length !== count) {
      throw new Error(`the stream ended after ${Object.keys(out.consumed).length} of ${count} messages`)
    }
    await consumer.commit({
      offsets: [...toCommit].map(([partition, { offset, leaderEpoch }]) => ({
        topic,
        partition,
        offset,
        leaderEpoch,
      })),
    })
    await stream.close()
    await consumer.close()
  })

  await steps.run('committed', async () => {
    const listed = await admin.listConsumerGroupOffsets({
      groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: ALL_PARTITIONS }] }],
    })
    for (const { groupId, topics } of listed) {
      if (groupId === group) Object.assign(out.committed, partitionsOf(topics, p => Number(p.committedOffset)))
    }
  })

  // The offsets of each partition for a time: -1 newest, -2 oldest, or a create time.
  const offsetsFor = async timestamp => {
    const listed = await admin.listOffsets({
      topics: [
        { name: topic, partitions: ALL_PARTITIONS.map(partitionIndex => ({ partitionIndex, timestamp })) },
      ],
    })
    return partitionsOf(listed, p => Number(p.offset))
  }
  await steps.run('list_offsets', async () => {
    out.newest = await offsetsFor(-1n)
    out.oldest = await offsetsFor(-2n)
  })
  await steps.run('offsets_for_time', async () => {
    out.time_target = out.base_timestamp + 1000 * Math.floor(count / 2)
    out.offsets_for_time = await offsetsFor(BigInt(out.time_target))
  })

  await steps.run('from_timestamp', async () => {
    // Each partition from its offset for the time, or from its end where none is that late.
    const offsets = ALL_PARTITIONS.map(partition => {
      const offset = out.offsets_for_time[partition]
      return { topic, partition, offset: BigInt(offset >= 0 ? offset : out.newest[partition]) }
    })
    const expected = offsets.reduce(
      (sum, { partition, offset }) => sum + out.newest[partition] - Number(offset),
      0
    )
    const reader = consumerOf(`${group}-from-timestamp`, 'platformatic-scenarios-from-timestamp')
    const stream = await reader.consume({ topics: [topic], mode: MessagesStreamModes.MANUAL, offsets })
    stream.on('data', record => out.from_timestamp.push(record.key))
    await waitFor(() => out.from_timestamp.length >= expected, `${expected} messages from the time`)
    await stream.close()
    await reader.close()
  })

  await steps.run('from_latest', async () => {
    const tail = consumerOf(`${group}-latest`, 'platformatic-scenarios-latest')
    const stream = await tail.consume({ topics: [topic], mode: MessagesStreamModes.LATEST })
    stream.on('data', record => out.from_latest.push(record.key))
    for (let i = 0; i < 100 && out.from_latest.length === 0; i++) {
      const key = lateKey(i)
      await send({ key, value: `value-${key}` })
      await sleep(200)
    }
    if (out.from_latest.length === 0) throw new Error('the consumer read none of 100 late messages')
    await stream.close()
    await tail.close()
  })
  await step('producer close', () => producer.close())

  await steps.run('rebalance', async () => {
    const members = [] // { consumer, stream, partitions: its current assignment }
    const join = async () => {
      const consumer = consumerOf(`${group}-trio`, `platformatic-scenarios-trio-${members.length}`)
      const member = { consumer, partitions: [] }
      consumer.on('consumer:group:join', ({ assignments }) => {
        const mine = (assignments || []).find(assignment => assignment.topic === topic)
        member.partitions = [...(mine ? mine.partitions : [])].sort((a, b) => a - b)
      })
      member.stream = await consumer.consume({ topics: [topic], mode: MessagesStreamModes.LATEST })
      member.stream.resume()
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
    await Promise.all(
      members.map(async ({ consumer, stream }) => {
        await stream.close()
        await consumer.close()
      })
    )
  })

  await steps.run('list_groups', async () => {
    out.groups = [...(await admin.listGroups()).keys()]
  })
  await steps.run('describe_group', async () => {
    const found = (await admin.describeGroups({ groups: [group] })).get(group)
    if (!found) throw new Error(`group ${group} not described`)
    out.group_state = found.state
  })
  await steps.run('delete_topic', () => admin.deleteTopics({ topics: [topic] }))
  await step('admin close', () => admin.close())
}

driver.run(CLIENT, VERSION, scenario)
