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
  FetchIsolationLevels,
  MessagesStreamFallbackModes,
  MessagesStreamModes,
  ProduceAcks,
  Producer,
  stringDeserializers,
  stringSerializers,
} = await import('@platformatic/kafka')
const { default: driver } = await import('./driver.cjs')
const { PARTITIONS, RETENTION_MS, message, lateKey, sharesPartitions, sleep, step, txnKeys, waitFor } =
  driver

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
  const partitionsOf = (listed, pick, of = topic) => {
    const found = {}
    for (const { name, partitions } of listed) {
      if (name !== of) continue
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
  const offsetsFor = async (timestamp, name = topic, isolationLevel = undefined) => {
    const listed = await admin.listOffsets({
      isolationLevel,
      topics: [{ name, partitions: ALL_PARTITIONS.map(partitionIndex => ({ partitionIndex, timestamp })) }],
    })
    return partitionsOf(listed, p => Number(p.offset), name)
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
  steps.skip(
    'rebalance_consumer_protocol',
    "not run with this client: the driver's groups use the classic protocol " +
      "(@platformatic/kafka's groupProtocol 'consumer' is not exercised here)"
  )

  await steps.run('list_groups', async () => {
    out.groups = [...(await admin.listGroups()).keys()]
  })
  await steps.run('describe_group', async () => {
    const found = (await admin.describeGroups({ groups: [group] })).get(group)
    if (!found) throw new Error(`group ${group} not described`)
    out.group_state = found.state
  })

  // transactions, transaction_offsets, fencing: the transactions of one transactional id
  // on T-txn, the offset one of them commits for group G-txn, and a producer fenced by
  // another that took its transactional id over.
  const txnTopic = `${topic}-txn`
  const txnGroup = `${group}-txn`
  const transactional = clientId =>
    new Producer({
      ...base,
      clientId,
      transactionalId: txnGroup,
      idempotent: true,
      serializers: stringSerializers,
      autocreateTopics: false,
    })
  const sendKeys = (txn, keys) =>
    txn.send({
      acks: ProduceAcks.ALL,
      messages: keys.map(key => ({ topic: txnTopic, key, value: `value-${key}` })),
    })
  // A producer's first beginTransaction() asks the coordinator for the transactional id's
  // producer id and epoch (InitProducerId). Unless told otherwise, the client asks with
  // producer id 0 and epoch 0, which Kafka (KIP-360) takes for "bump my producer id 0":
  // PRODUCER_FENCED once the id belongs to another producer id, as after any earlier
  // producer of it. -1 and -1 are what a new producer asks with.
  const begin = client => client.beginTransaction({ producerId: -1n, producerEpoch: -1 })

  const txnProducer = transactional('platformatic-scenarios-txn')
  await step('transactions', async () => {
    await admin.createTopics({ topics: [txnTopic], partitions: PARTITIONS, replicas: 1 })
    const committed = await begin(txnProducer)
    await sendKeys(committed, txnKeys('commit'))
    // Its offsets go with a consumer's records: a member of group G-txn reads T's first
    // record of partition 0, and the transaction commits the offset after it, 1.
    const member = consumerOf(txnGroup, 'platformatic-scenarios-txn-member')
    const stream = await step('transaction_offsets', async () => {
      const reading = await member.consume({
        topics: [topic],
        mode: MessagesStreamModes.EARLIEST,
      })
      let first
      reading.on('data', record => {
        if (record.partition === 0 && record.offset === 0n) first ??= record
      })
      await waitFor(() => first, `${topic}'s record at offset 0 of partition 0`)
      await committed.addConsumer(member)
      await committed.addOffset(first)
      return reading
    })
    await committed.commit()
    await stream.close()
    await member.close()
    const aborted = await begin(txnProducer)
    await sendKeys(aborted, txnKeys('abort')) // resolves once the broker acknowledged them
    await aborted.abort()
  })

  await step('fencing', async () => {
    // The successor's first transaction initialises the transactional id: a new epoch.
    const successor = transactional('platformatic-scenarios-txn-successor')
    const after = await begin(successor)
    out.fenced = await driver.fencedError(async () => {
      const zombie = await begin(txnProducer)
      await sendKeys(zombie, ['txn-zombie-000'])
      await zombie.commit()
    }, describeError)
    await sendKeys(after, txnKeys('after'))
    await after.commit()
    await successor.close()
  })
  await step('transactional producer close', () => txnProducer.close())

  await step('transaction_offsets', async () => {
    out.transaction_offsets = await driver.untilCommitted(async () => {
      const listed = await admin.listConsumerGroupOffsets({
        groups: [{ groupId: txnGroup, topics: [{ name: topic, partitionIndexes: ALL_PARTITIONS }] }],
      })
      const found = {}
      for (const { groupId, topics } of listed) {
        if (groupId !== txnGroup) continue
        const offsets = partitionsOf(topics, p => Number(p.committedOffset))
        for (const [partition, offset] of Object.entries(offsets)) {
          if (offset >= 0) found[partition] = offset
        }
      }
      return found
    })
  })

  await step('transactions', async () => {
    const reader = consumerOf(`${txnGroup}-reader`, 'platformatic-scenarios-txn-reader')
    const stream = await reader.consume({
      topics: [txnTopic],
      mode: MessagesStreamModes.MANUAL,
      offsets: ALL_PARTITIONS.map(partition => ({ topic: txnTopic, partition, offset: 0n })),
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
    })
    stream.on('data', record => out.read_committed.push(record.key))
    // Where each partition's reading got to: the offset it fetches next, past the markers
    // and the aborted records too.
    const positions = () => {
      const at = {}
      for (const [key, offset] of stream.offsetsToFetch) {
        const colon = key.lastIndexOf(':') // "topic:partition"
        if (key.slice(0, colon) === txnTopic) at[key.slice(colon + 1)] = Number(offset)
      }
      return at
    }
    await driver.readToEnd({
      ends: () => offsetsFor(-1n, txnTopic, FetchIsolationLevels.READ_COMMITTED),
      positions,
      read: out.read_committed,
      expected: [...txnKeys('commit'), ...txnKeys('after')],
    })
    await stream.close()
    await reader.close()
  })
  steps.done('transactions', 'transaction_offsets', 'fencing')

  await steps.run('delete_topic', () => admin.deleteTopics({ topics: [topic] }))
  await step('admin close', () => admin.close())
}

// Its errors gather the broker's (apiId: the protocol's name) and each retry's under `errors`.
function describeError(err) {
  if (!err || typeof err !== 'object') return String(err)
  let text = `${err.name || 'Error'}: ${err.message}`
  if (err.apiId) text += ` [${err.apiId}]`
  const inner = [...(err.errors || []), ...(err.cause ? [err.cause] : [])]
  return inner.length ? `${text} (${inner.map(describeError).join('; ')})` : text
}

driver.run(CLIENT, VERSION, scenario, describeError)
