// What every Node driver of tests/interop/test_client_matrix.py shares: its flags, the
// report it fills, a step's failure, and how a run ends. The test run copies this file
// next to each driver's script.
'use strict'

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

// Runs one step, turning its failure into "<client>-scenarios: <what>: <err>".
async function step(what, fn) {
  try {
    return await fn()
  } catch (err) {
    const wrapped = new Error(err && err.message ? err.message : String(err))
    wrapped.what = what
    wrapped.cause = err
    throw wrapped
  }
}

function sortedObject(object) {
  const out = {}
  for (const key of Object.keys(object).sort()) out[key] = object[key]
  return out
}

// The report every driver prints (the fields of tests/interop/go/sarama/main.go's).
function newReport(client, version) {
  return {
    client,
    version,
    produced: {}, // key -> partition
    consumed: {}, // key -> value
    headers: {}, // key -> its "origin" header
    committed: {}, // partition -> offset
    newest: {}, // partition -> high watermark
    oldest: {},
    topic_configs: {},
    default_config: {},
    groups: [],
    group_state: '',
  }
}

// Runs `scenario(flags, report)` within 60 s and prints the report as one JSON line, or
// the failed step on stderr (exit 1). `describe` says what an error was.
function run(client, version, scenario, describe = String) {
  const fail = (what, err) => {
    process.stderr.write(`${client}-scenarios: ${what}: ${describe(err)}\n`, () => process.exit(1))
  }
  setTimeout(() => fail('timeout', 'the scenario did not finish within 60 s'), 60000)
  const report = newReport(client, version)
  step('flags', () => parseArgs(process.argv.slice(2)))
    .then(flags => scenario(flags, report))
    .then(() => {
      report.consumed = sortedObject(report.consumed)
      report.headers = sortedObject(report.headers)
      process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(0))
    })
    .catch(err => fail(err.what || 'scenario', err.cause || err))
}

module.exports = { run, step }
