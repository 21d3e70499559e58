// A @platformatic/kafka client run by tests/interop/test_client_matrix.py against a broker.
//
//	node scenarios.mjs -bootstrap HOST:PORT -topic T -group G [-messages N]
//
// The same scenario as tests/interop/go/sarama/main.go: it creates the topic, produces
// keyed gzip messages, consumes them in a consumer group, commits, and prints one JSON
// object with what it saw; the test checks it against the broker.
// @platformatic/kafka 2.12.1 asks for Node >= 22.22 ("engines"); the only newer built-in
// it calls is Promise.withResolvers (Node 22). Supply it on older Node (20), then load
// the client: a static import would run before this line.
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
const { run, step } = driver

const CLIENT = '@platformatic/kafka'
const VERSION = '2.12.1'
const PARTITIONS = 3

async function scenario({ bootstrap, topic, group, count }, out) {
  const base = { bootstrapBrokers: [bootstrap], retries: 3 }

  const admin = new Admin({ ...base, clientId: 'platformatic-scenarios-admin' })
  await step('create topic', () =>
    admin.createTopics({
      topics: [topic],
      partitions: PARTITIONS,
      replicas: 1,
      configs: [{ name: 'retention.ms', value: '3600000' }],
    })
  )
  await step('describe configs', async () => {
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
        await new Promise((resolve) => setTimeout(resolve, 100))
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
  for (let i = 0; i < count; i++) {
    const key = `key-${String(i).padStart(3, '0')}`
    const result = await step('produce', () =>
      producer.send({
        acks: ProduceAcks.ALL,
        compression: CompressionAlgorithms.GZIP,
        messages: [{ topic, key, value: `value-${key}`, headers: { origin: `header-${key}` } }],
      })
    )
    const written = (result.offsets || []).find(entry => entry.topic === topic)
    if (!written) throw Object.assign(new Error('no partition in the produce result'), { what: 'produce' })
    out.produced[key] = written.partition
  }
  await step('producer close', () => producer.close())

  const consumer = new Consumer({
    ...base,
    clientId: 'platformatic-scenarios-consumer',
    groupId: group,
    deserializers: stringDeserializers,
    autocommit: false,
    maxWaitTime: 500,
  })
  const stream = await step('consume', () =>
    consumer.consume({
      topics: [topic],
      mode: MessagesStreamModes.COMMITTED,
      fallbackMode: MessagesStreamFallbackModes.EARLIEST,
      autocommit: false,
    })
  )
  const toCommit = new Map() // partition -> { offset after the last message there, leaderEpoch }
  await step('consume', async () => {
    if (count === 0) return
    for await (const message of stream) {
      out.consumed[message.key] = message.value
      for (const [name, value] of message.headers) {
        if (name === 'origin') out.headers[message.key] = value
      }
      const next = message.offset + 1n
      const current = toCommit.get(message.partition)
      if (!current || next > current.offset) {
        toCommit.set(message.partition, { offset: next, leaderEpoch: message.leaderEpoch })
      }
      if (Object.keys(out.consumed).length === count) break
    }
  })
  if (Object.keys(out.consumed).length !== count) {
    const error = new Error('the stream ended')
    error.what = `consumed ${Object.keys(out.consumed).length} of ${count} messages`
    throw error
  }
  await step('commit', () =>
    consumer.commit({
      offsets: [...toCommit].map(([partition, { offset, leaderEpoch }]) => ({
        topic,
        partition,
        offset,
        leaderEpoch,
      })),
    })
  )
  await step('consumer stream close', () => stream.close())
  await step('consumer group close', () => consumer.close())

  await step('list consumer group offsets', async () => {
    const listed = await admin.listConsumerGroupOffsets({
      groups: [{ groupId: group, topics: [{ name: topic, partitionIndexes: [0, 1, 2] }] }],
    })
    for (const entry of listed) {
      if (entry.groupId !== group) continue
      for (const { name, partitions } of entry.topics) {
        if (name !== topic) continue
        for (const { partitionIndex, committedOffset } of partitions) {
          out.committed[partitionIndex] = Number(committedOffset)
        }
      }
    }
  })
  const partitionRequests = timestamp => [
    {
      name: topic,
      partitions: [0, 1, 2].map(partitionIndex => ({ partitionIndex, timestamp })),
    },
  ]
  for (const [what, timestamp, into] of [
    ['newest offset', -1n, out.newest],
    ['oldest offset', -2n, out.oldest],
  ]) {
    await step(what, async () => {
      const listed = await admin.listOffsets({ topics: partitionRequests(timestamp) })
      for (const { name, partitions } of listed) {
        if (name !== topic) continue
        for (const { partitionIndex, offset } of partitions) into[partitionIndex] = Number(offset)
      }
    })
  }
  await step('list groups', async () => {
    const listed = await admin.listGroups()
    out.groups = [...listed.keys()].sort()
  })
  await step('describe groups', async () => {
    const described = await admin.describeGroups({ groups: [group] })
    const found = described.get(group)
    if (!found) throw new Error(`group ${group} not described`)
    out.group_state = found.state
  })
  await step('delete topic', () => admin.deleteTopics({ topics: [topic] }))
  await step('admin close', () => admin.close())
}

run(CLIENT, VERSION, scenario)
