// What every Node driver of tests/interop/test_client_matrix.py shares: its flags, the
// report of tests/interop/SCENARIOS.md, the bookkeeping of its steps, the messages it
// produces, and how a run ends. The test run copies this file next to each driver.
'use strict'

const STEPS = [
  'create_topic',
  'describe_configs',
  'produce',
  'headers',
  'timestamps',
  'keyed',
  'consume_group',
  'committed',
  'list_offsets',
  'offsets_for_time',
  'from_timestamp',
  'from_latest',
  'rebalance',
  'rebalance_consumer_protocol',
  'list_groups',
  'describe_group',
  'transactions',
  'transaction_offsets',
  'fencing',
  'delete_topic',
]
const PARTITIONS = 3
const RETENTION_MS = '3600000'
const DEADLINE_MS = 60000
const TXN_KEYS = 5 // records each transaction of the transactions step sends

// Go's flag syntax, as the Go drivers take them: -name value, -name=value, --name value.
function parseArgs(argv) {
  const flags = { bootstrap: '', topic: '', group: '', messages: '30' }
  for (let i = 0; i < argv.length; i++) {
    const match = /^--?([^=]+)(?:=(.*))?$/.exec(argv[i])
    if (!match || !(match[1] in flags)) throw new Error(`unknown argument ${argv[i]}`)
    if (match[2] !== undefined) {
      flags[match[1]] = match[2]
    } else {
      if (i + 1 >= argv.length) throw new Error(`flag needs an argument: ${argv[i]}`)
      flags[match[1]] = argv[++i]
    }
  }
  for (const name of ['bootstrap', 'topic', 'group']) {
    if (!flags[name]) throw new Error(`-${name} is required`)
  }
  const count = Number(flags.messages)
  if (!Number.isInteger(count) || count < 0) throw new Error(`bad -messages ${flags.messages}`)
  return { bootstrap: flags.bootstrap, topic: flags.topic, group: flags.group, count }
}

// Runs one action, turning its failure into "<client>-scenarios: <what>: <err>".
async function step(what, fn) {
  try {
    return await fn()
  } catch (err) {
    if (err && err.what) {
      err.what = `${what}: ${err.what}`
      throw err
    }
    const wrapped = new Error(err && err.message ? err.message : String(err))
    wrapped.what = what
    wrapped.cause = err
    throw wrapped
  }
}

// The steps done, in the catalogue's order, and the ones left out with their reason.
class Steps {
  constructor(report) {
    this.report = report
  }

  // Runs catalogue step `name`: done once `fn` returns.
  async run(name, fn) {
    const result = await step(name, fn)
    this.done(name)
    return result
  }

  // Steps that a step already run did as well (headers go with produce).
  done(...names) {
    for (const name of names) this.#record(name)
    this.report.steps.push(...names)
  }

  skip(name, reason) {
    this.#record(name)
    this.report.skipped[name] = reason
  }

  #record(name) {
    if (!STEPS.includes(name)) throw new Error(`no step ${name} in SCENARIOS.md`)
    if (this.report.steps.includes(name) || name in this.report.skipped) {
      throw new Error(`step ${name} done or skipped twice`)
    }
  }

  // A step left out silently, or done out of order, is the driver's own bug.
  check() {
    const { steps, skipped } = this.report
    const missing = STEPS.filter(name => !steps.includes(name) && !(name in skipped))
    if (missing.length) throw new Error(`steps neither done nor skipped: ${missing}`)
    const order = steps.map(name => STEPS.indexOf(name))
    if (order.some((index, i) => i > 0 && index < order[i - 1])) {
      throw new Error(`steps out of the catalogue's order: ${steps}`)
    }
  }
}

function newReport(client, version) {
  return {
    client,
    version,
    steps: [],
    skipped: {}, // step -> why the client cannot do it
    topic_configs: {}, // name -> value
    default_config: {}, // name -> whether the client sees it as a default
    produced: {}, // key -> partition acknowledged
    codecs: [],
    partitioner: '',
    base_timestamp: null,
    consumed: {}, // key -> { value, partition, offset, timestamp, headers }
    committed: {}, // partition -> offset
    oldest: {},
    newest: {},
    time_target: null,
    offsets_for_time: {}, // partition -> offset, -1 where no message is that late
    from_timestamp: [], // keys
    from_latest: [], // keys
    group_of_two: [], // each member's partitions
    group_of_three: [],
    groups: [],
    group_state: '',
    read_committed: [], // keys a read_committed consumer read from T-txn
    transaction_offsets: {}, // partition -> offset committed by the transaction
    fenced: '', // the error the fenced producer got
  }
}

// Message i of the `produce` step, its create time `base + 1000 * i`.
function message(i, base) {
  const key = `key-${String(i).padStart(3, '0')}`
  return { key, value: `value-${key}`, origin: `header-${key}`, timestamp: base + 1000 * i }
}

// The wall clock at start, down to a second, minus N + 60 s: every create time in the past.
function baseTimestamp(count) {
  return Math.floor(Date.now() / 1000) * 1000 - (count + 60) * 1000
}

function lateKey(i) {
  return `late-${String(i).padStart(3, '0')}`
}

// The keys one transaction of the transactions step sends: txn-<kind>-000 .. -004.
function txnKeys(kind) {
  return [...Array(TXN_KEYS).keys()].map(i => `txn-${kind}-${String(i).padStart(3, '0')}`)
}

// Whether the members' assignments split the partitions among them, each holding some.
function sharesPartitions(assignments) {
  const held = assignments.flat()
  return (
    assignments.every(partitions => partitions.length > 0) &&
    held.length === PARTITIONS &&
    new Set(held).size === PARTITIONS
  )
}

async function waitFor(condition, what, timeoutMs = 20000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(intervalMs)
  }
}

// What the fenced producer of the fencing step does (`attempt`: begin, send, commit): the
// text of the error it got. Its success is the driver's failure.
async function fencedError(attempt, describe = String) {
  try {
    await attempt()
  } catch (err) {
    return describe(err)
  }
  throw new Error('the fenced producer sent and committed without an error')
}

// A transaction's offset commit: the broker materialises it once the commit's markers are
// written, which a real Kafka does after the commit returns. `read()` gives partition ->
// offset; asked again until it holds one, for up to `timeoutMs` (then what it holds).
async function untilCommitted(read, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs
  let found = await read()
  while (Object.keys(found).length === 0 && Date.now() < deadline) {
    await sleep(100)
    found = await read()
  }
  return found
}

// Reads with read_committed to the end: until the reader's position in every partition
// (`positions()`: partition -> the offset it fetches next, markers included) has reached
// its read_committed end offset (`ends()`: partition -> last stable offset, asked anew
// each time), and `read` holds every key in `expected`. A real Kafka writes the last
// transaction's markers after its commit returned, and until then its end offset stops
// short of its records: with keys missing, the ends are asked again, for up to
// `timeoutMs`; after that the keys read are the report (the test tells what is missing).
async function readToEnd({ ends, positions, read, expected, timeoutMs = 10000 }) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const end = await ends()
    const at = positions()
    const reached = Object.entries(end).every(([partition, offset]) => (at[partition] || 0) >= offset)
    const keys = new Set(read)
    if (reached && (expected.every(key => keys.has(key)) || Date.now() > deadline)) break
    if (Date.now() > deadline + 5000) {
      const where = `${JSON.stringify(at)}, the end offsets ${JSON.stringify(end)}`
      throw new Error(`the reader did not reach the end: at ${where}`)
    }
    await sleep(100)
  }
  await sleep(100) // records fetched with the last batch, still on their way to the reader
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

function sortedObject(object) {
  const out = {}
  for (const key of Object.keys(object).sort()) out[key] = object[key]
  return out
}

// Runs `scenario(flags, report, steps)` within 60 s and prints the report as one JSON
// line, or the failed step on stderr (exit 1). `describe` says what an error was.
function run(client, version, scenario, describe = String) {
  const fail = (what, err) => {
    process.stderr.write(`${client}-scenarios: ${what}: ${describe(err)}\n`, () => process.exit(1))
  }
  setTimeout(() => fail('timeout', `the scenario did not finish within ${DEADLINE_MS / 1000} s`), DEADLINE_MS)
  const report = newReport(client, version)
  const steps = new Steps(report)
  step('flags', () => parseArgs(process.argv.slice(2)))
    .then(flags => scenario(flags, report, steps))
    .then(() => step('report', () => steps.check()))
    .then(() => {
      report.consumed = sortedObject(report.consumed)
      report.from_timestamp.sort()
      report.from_latest.sort()
      report.read_committed.sort()
      report.groups.sort()
      process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(0))
    })
    .catch(err => fail(err.what || 'scenario', err.cause || err))
}

module.exports = {
  PARTITIONS,
  RETENTION_MS,
  baseTimestamp,
  fencedError,
  lateKey,
  message,
  readToEnd,
  run,
  sharesPartitions,
  sleep,
  step,
  txnKeys,
  untilCommitted,
  waitFor,
}
