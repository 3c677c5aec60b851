// Decodes an OTLP ExportTraceServiceRequest (protobuf bytes) with the
// classes the OpenTelemetry project generates for JavaScript (protobufjs,
// shipped in @opentelemetry/otlp-transformer 0.211.0 as build/src/generated/
// root.js), and prints it as JSON: ids as hex, 64-bit integers as decimal
// strings, enums as numbers. The reference for tests/tracing/otlp_reference_test.cc.
//
//   npm ci && node decode.mjs export.pb > export.json
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const message = Request.decode(readFileSync(process.argv[2]));
const object = Request.toObject(message, { longs: String, enums: Number, bytes: String, defaults: false });
// toObject gives bytes as base64; OTLP's JSON form (and the test) has ids in hex.
const ids = new Set(['traceId', 'spanId', 'parentSpanId']);
const toHex = (v) => {
  if (Array.isArray(v)) return v.map(toHex);
  if (v && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) =>
      [k, ids.has(k) ? Buffer.from(x, 'base64').toString('hex') : toHex(x)]));
  return v;
};
process.stdout.write(JSON.stringify({ generator: 'tools/testdata/otlp_reference/decode.mjs',
  reference: '@opentelemetry/otlp-transformer@0.211.0 (protobufjs generated classes)',
  ...toHex(object) }, null, 1) + '\n');
