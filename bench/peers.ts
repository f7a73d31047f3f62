/**
 * The peer libraries, loaded from bench/node_modules (installed by the bench targets only) and the
 * library under test, loaded from its build (dist/). The interfaces below declare only what the
 * bench uses, so `make lint` type-checks the bench without the peers installed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type * as lib from '../lib';

type Library = typeof lib;

const benchRequire = createRequire(join(__dirname, 'package.json'));

/**
 * The library's public API, as built by `make build` (the shipped artefact, not lib/ via tsx).
 * `BENCH_LIBRARY_DIST` points at another build's dist/ (bench/ab.ts compares two builds).
 */
export function loadLibrary(): Library {
  const dist = process.env.BENCH_LIBRARY_DIST;
  return benchRequire(dist ? join(dist, 'cjs/index.js') : '../dist/cjs/index.js') as Library;
}

/**
 * The library's prefetch defaults (internal, not exported): the raw contender uses the same. Older
 * builds (bench/ab.ts) kept them in cjs/config.js.
 */
export function loadPrefetch(): Readonly<Record<string, number>> {
  const dist = process.env.BENCH_LIBRARY_DIST ?? join(__dirname, '..', 'dist');
  const file = ['cjs/internal/settings/librdkafka-settings.js', 'cjs/config.js']
    .map((f) => join(dist, f))
    .find((f) => existsSync(f));
  if (file === undefined) throw new Error(`no build in ${dist}: run make build`);
  return (benchRequire(file) as { DEFAULT_PREFETCH: Readonly<Record<string, number>> })
    .DEFAULT_PREFETCH;
}

// ----------------------------------------------------------------------------------- KafkaJS
export interface KafkaJsMessage {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
}

export interface KafkaJsBatch {
  topic: string;
  partition: number;
  messages: KafkaJsMessage[];
}

export interface KafkaJsRunConfig {
  partitionsConsumedConcurrently?: number;
  autoCommit?: boolean;
  autoCommitInterval?: number;
  eachMessage?: (payload: {
    topic: string;
    partition: number;
    message: KafkaJsMessage;
  }) => Promise<void>;
  eachBatch?: (payload: {
    batch: KafkaJsBatch;
    resolveOffset: (offset: string) => void;
    heartbeat: () => Promise<void>;
    isRunning: () => boolean;
    isStale: () => boolean;
    commitOffsetsIfNecessary: () => Promise<void>;
  }) => Promise<void>;
}

export interface KafkaJsConsumer {
  connect(): Promise<void>;
  subscribe(s: { topics: string[]; fromBeginning?: boolean }): Promise<void>;
  run(config: KafkaJsRunConfig): Promise<void>;
  commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void>;
  disconnect(): Promise<void>;
  on(event: string, listener: (e: { payload: Record<string, unknown> }) => void): () => void;
  events: { GROUP_JOIN: string; REBALANCING: string; CRASH: string };
}

export interface KafkaJsModule {
  Kafka: new (config: { clientId: string; brokers: string[]; logLevel?: number }) => {
    consumer(config: {
      groupId: string;
      sessionTimeout?: number;
      heartbeatInterval?: number;
      rebalanceTimeout?: number;
      maxBytes?: number;
      maxBytesPerPartition?: number;
    }): KafkaJsConsumer;
  };
  logLevel: { NOTHING: number; ERROR: number };
}

// -------------------------------------------------------------------------- @platformatic/kafka
export interface PlatformaticMessage {
  topic: string;
  partition: number;
  offset: bigint;
  key: Buffer | undefined;
  value: Buffer | undefined;
}

export interface PlatformaticStream {
  on(event: 'data', listener: (m: PlatformaticMessage) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  close(): Promise<void>;
}

export interface PlatformaticConsumer {
  consume(options: {
    topics: string[];
    mode?: 'latest' | 'earliest' | 'committed' | 'manual';
    fallbackMode?: 'latest' | 'earliest' | 'fail';
    autocommit?: boolean | number;
    sessionTimeout?: number;
    heartbeatInterval?: number;
  }): Promise<PlatformaticStream>;
  close(force?: boolean): Promise<void>;
}

export interface PlatformaticModule {
  Consumer: new (options: {
    groupId: string;
    clientId: string;
    bootstrapBrokers: string[];
  }) => PlatformaticConsumer;
}

// ------------------------------------------------------------------------------------- loading
/** A package as found in bench/node_modules: its version, or why it is not there. */
export type PeerStatus =
  | { name: string; installed: true; version: string }
  | { name: string; installed: false; reason: string };

export const PEER_PACKAGES = ['kafkajs', '@platformatic/kafka'] as const;

/**
 * Why `@confluentinc/kafka-javascript` is not among the contenders. Its install script
 * (`node-pre-gyp install --fallback-to-build`) downloads a prebuilt binary, and the fallback source
 * build's librdkafka `configure` downloads zlib, OpenSSL, zstd and curl sources; this machine only
 * reaches the package registries. Tried with 1.10.1 on 2026-11-30.
 */
export const CKJS_STATUS: PeerStatus = {
  name: '@confluentinc/kafka-javascript',
  installed: false,
  reason:
    'not installable offline here: `npm install @confluentinc/kafka-javascript@1.10.1` runs `node-pre-gyp install --fallback-to-build`; ' +
    'the prebuilt binary download (github.com release asset) fails with ENOTFOUND, and the fallback source build fails because ' +
    "librdkafka's configure downloads zlib, OpenSSL, zstd and libcurl sources from their project sites",
};

/** A package's version from its package.json in bench/node_modules or the repo's node_modules. */
export function packageVersion(name: string): string | undefined {
  for (const dir of [join(__dirname, 'node_modules'), join(__dirname, '..', 'node_modules')]) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, name, 'package.json'), 'utf8')) as {
        version: string;
      };
      return pkg.version.replace(/^v/, '');
    } catch {
      // not in this node_modules
    }
  }
  return undefined;
}

export function peerStatus(name: string): PeerStatus {
  const version = packageVersion(name);
  if (version === undefined || !existsSync(join(__dirname, 'node_modules', name))) {
    return {
      name,
      installed: false,
      reason: 'not installed in bench/node_modules: run `make bench-install`',
    };
  }
  return { name, installed: true, version };
}

export function loadKafkaJs(): KafkaJsModule {
  return benchRequire('kafkajs') as KafkaJsModule;
}

export function loadPlatformatic(): PlatformaticModule {
  return benchRequire('@platformatic/kafka') as PlatformaticModule;
}
