import { createHash, type Hash } from "node:crypto";
import { ReposyncError } from "../errors.js";
import type { RpmPackage } from "../rpm/package.js";
import { type RangeReader, readRpmHeader } from "../rpm/read-header.js";
import type { CandidateAsset } from "./candidate-assets.js";
import { GITHUB_API_VERSION, type GitHubClient } from "./client.js";
import { GitHubHttpError, headerRecord } from "./retryable.js";
import { toReposyncError, withRetries } from "./with-retries.js";

/** What the reader needs to know about an asset. */
export type AssetLocation = Pick<
  CandidateAsset,
  "assetId" | "name" | "size" | "digest" | "url" | "browserDownloadUrl"
>;

/**
 * How to reach the bytes. `browser`: the public download URL, anonymous, free of API budget.
 * `api`: the asset's API URL with the token (private repos). `auto` (default): browser first,
 * and on a 404 with a token, the API URL (one wasted request per asset of a private repo; pass
 * `api` when the repo is known to be private).
 */
export type AssetAccess = "browser" | "api" | "auto";

export interface ReadAssetOptions {
  readonly access?: AssetAccess;
  readonly signal?: AbortSignal;
  /** First ranged read (64 KiB). */
  readonly firstRead?: number;
  readonly maxHeaderBytes?: number;
  /** Timeout of a whole-file download (10 min); ranged reads use the client's. */
  readonly downloadTimeoutMs?: number;
}

export interface AssetHeaderResult {
  readonly pkg: RpmPackage;
  /** Hex sha256 of the whole file: GitHub's digest, or computed by streaming the file once. */
  readonly sha256: string;
  /** HTTP requests sent for this asset, every hop and retry included. */
  readonly requests: number;
  /** Response body bytes received. */
  readonly bytes: number;
  /** True when the file was downloaded whole, to hash it. */
  readonly downloaded: boolean;
  /** The route that worked: a caller reading many assets of one repo can go straight to it. */
  readonly access: "browser" | "api";
}

const MAX_REDIRECTS = 5;

/**
 * Reads an asset's RPM header with ranged GETs: 64 KiB first (the whole header of most
 * packages), then exactly the missing rest. When GitHub has no digest for the asset, the file
 * is instead downloaded once, whole, streamed through sha256 (memory stays at the header's size)
 * while the header is parsed from its first bytes.
 *
 * The token goes only to the API URL. Redirects are followed here, not by fetch, so that no hop
 * after the first ever carries Authorization (the CDN refuses it, and must not see it) and so
 * that each hop takes its own token from the bucket.
 */
export async function readAssetHeader(
  client: GitHubClient,
  asset: AssetLocation,
  options: ReadAssetOptions = {},
): Promise<AssetHeaderResult> {
  const source = new AssetSource(client, asset, options);
  const given = /^sha256:([0-9a-f]{64})$/i.exec(asset.digest ?? "")?.[1]?.toLowerCase();
  const headerOptions = {
    fileSize: asset.size,
    ...(options.firstRead !== undefined ? { firstRead: options.firstRead } : {}),
    ...(options.maxHeaderBytes !== undefined ? { maxHeaderBytes: options.maxHeaderBytes } : {}),
  };
  try {
    if (given) {
      const { pkg } = await readRpmHeader(source.reader, headerOptions);
      await source.close();
      return {
        pkg,
        sha256: given,
        requests: source.requests,
        bytes: source.bytes,
        downloaded: false,
        access: source.access,
      };
    }
    // A failure mid-stream restarts the download: a half-hashed file is worth nothing.
    return await withRetries(retryContext(client, options.signal), async () => {
      source.reset();
      await source.startDownload();
      const { pkg } = await readRpmHeader(source.reader, headerOptions);
      const sha256 = await source.finishHash();
      return {
        pkg,
        sha256,
        requests: source.requests,
        bytes: source.bytes,
        downloaded: true,
        access: source.access,
      };
    });
  } catch (err) {
    throw toReposyncError(err, `reading asset ${asset.name} (${asset.assetId})`, options.signal);
  } finally {
    await source.close();
  }
}

/**
 * Opens a whole-file download of an asset (the package cache's miss path), following redirects
 * exactly as readAssetHeader does: the token only on the API URL, never on the CDN hop, each hop
 * through the bucket, the download timeout per attempt. Retried per the retry table until an
 * answer starts; the caller reads the body, or cancels it.
 */
export async function openAssetDownload(
  client: GitHubClient,
  asset: AssetLocation,
  options: Pick<ReadAssetOptions, "access" | "signal" | "downloadTimeoutMs"> = {},
): Promise<Response> {
  const source = new AssetSource(client, asset, options);
  try {
    return await withRetries(retryContext(client, options.signal), () => source.openWhole());
  } catch (err) {
    throw toReposyncError(
      err,
      `downloading asset ${asset.name} (${asset.assetId})`,
      options.signal,
    );
  }
}

function retryContext(client: GitHubClient, signal: AbortSignal | undefined) {
  return {
    clock: client.clock,
    policy: client.retry,
    ...(signal ? { signal } : {}),
    onRetry: (e: { kind: string; attempt: number; delayMs: number }) =>
      client.logger?.warn({ ...e }, "retrying GitHub asset read"),
  };
}

/**
 * The bytes of one asset as the header parser sees them: a prefix held from byte 0, extended by
 * ranged GETs, or by pulling from a whole-body stream (a 200 answer, or a download to hash).
 */
class AssetSource {
  requests = 0;
  bytes = 0;
  private held: Buffer = Buffer.alloc(0);
  private stream: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private streamEnded = false;
  private hash: Hash | undefined;
  private hashed = 0;
  /** Where the bytes were found last (the CDN after a redirect): later ranges go there directly. */
  private resolved: string | undefined;
  private useApi: boolean;

  /** The route in use: `api` once the public URL was refused (a private repo). */
  get access(): "browser" | "api" {
    return this.useApi ? "api" : "browser";
  }

  constructor(
    private readonly client: GitHubClient,
    private readonly asset: AssetLocation,
    private readonly options: ReadAssetOptions,
  ) {
    this.useApi = options.access === "api";
  }

  readonly reader: RangeReader = async (start, end) => {
    await this.ensure(end);
    return this.held.subarray(Math.min(start, this.held.length));
  };

  reset(): void {
    this.held = Buffer.alloc(0);
    this.hash = undefined;
    this.hashed = 0;
    this.streamEnded = false;
  }

  /** A GET of the whole file, for openAssetDownload. */
  openWhole(): Promise<Response> {
    return this.get(null);
  }

  async startDownload(): Promise<void> {
    await this.close();
    this.hash = createHash("sha256");
    const response = await this.get(null);
    this.adoptWholeBody(response);
  }

  /** Pulls the rest of the download through the hash, keeping none of it. */
  async finishHash(): Promise<string> {
    const hash = this.hash;
    if (!hash) throw new Error("finishHash without startDownload");
    this.held = Buffer.alloc(0);
    while (await this.pull(false)) {}
    if (this.hashed !== this.asset.size) {
      throw new ReposyncError(
        "UPSTREAM_MISMATCH",
        `${this.asset.name}: downloaded ${this.hashed} bytes, GitHub says ${this.asset.size}`,
      );
    }
    return hash.digest("hex");
  }

  /** Cancels a body still being received (a 200 to a ranged read, once the header is in). */
  async close(): Promise<void> {
    const stream = this.stream;
    this.stream = undefined;
    if (stream && !this.streamEnded) await stream.cancel().catch(() => {});
  }

  private async ensure(end: number): Promise<void> {
    while (this.held.length < end) {
      if (this.stream) {
        if (!(await this.pull(true))) return;
        continue;
      }
      const start = this.held.length;
      const gotten = await withRetries(retryContext(this.client, this.options.signal), () =>
        this.fetchRange(start, end),
      );
      if (gotten === 0) return;
    }
  }

  /** One ranged GET for [start, end); returns the bytes added (0 at end of file). */
  private async fetchRange(start: number, end: number): Promise<number> {
    const response = await this.get(`bytes=${start}-${end - 1}`);
    if (response.status === 200) {
      this.held = Buffer.alloc(0);
      this.adoptWholeBody(response);
      // The server ignored Range; skip what we already had (only possible after a first read).
      while (this.held.length < start && (await this.pull(true))) {}
      return this.held.length - start;
    }
    const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(response.headers.get("content-range") ?? "");
    if (!range || Number(range[1]) !== start) {
      await response.body?.cancel();
      throw new ReposyncError(
        "UPSTREAM_MISMATCH",
        `${this.asset.name}: asked for bytes from ${start}, got Content-Range ${response.headers.get("content-range")}`,
      );
    }
    this.checkTotal(range[3] === "*" ? null : Number(range[3]));
    const body = Buffer.from(await response.arrayBuffer());
    this.bytes += body.length;
    this.client.counters.bytes += body.length;
    this.held = Buffer.concat([this.held, body]);
    return body.length;
  }

  private adoptWholeBody(response: Response): void {
    const length = response.headers.get("content-length");
    this.checkTotal(length === null ? null : Number(length));
    if (!response.body) throw new ReposyncError("UPSTREAM_MISMATCH", `${this.asset.name}: no body`);
    this.stream = response.body.getReader();
    this.streamEnded = false;
  }

  /** Reads one chunk of the whole-body stream; false at its end. */
  private async pull(keep: boolean): Promise<boolean> {
    if (!this.stream) return false;
    const { done, value } = await this.stream.read();
    if (done) {
      this.streamEnded = true;
      return false;
    }
    this.bytes += value.length;
    this.client.counters.bytes += value.length;
    if (this.hash) {
      this.hash.update(value);
      this.hashed += value.length;
    }
    if (keep) this.held = Buffer.concat([this.held, value]);
    return true;
  }

  private checkTotal(total: number | null): void {
    if (total !== null && total !== this.asset.size) {
      throw new ReposyncError(
        "UPSTREAM_MISMATCH",
        `${this.asset.name}: the server has ${total} bytes, GitHub lists ${this.asset.size}`,
      );
    }
  }

  /**
   * GET with redirects followed by hand. A remembered CDN URL that fails (signatures expire after
   * minutes) is forgotten and the asset resolved again, once.
   */
  private async get(range: string | null): Promise<Response> {
    if (this.resolved) {
      const url = this.resolved;
      try {
        return await this.follow(url, false, range);
      } catch (err) {
        if (!(err instanceof GitHubHttpError) || err.status < 400 || err.status >= 500) throw err;
        this.resolved = undefined;
      }
    }
    try {
      return await this.follow(this.startUrl(), this.useApi, range);
    } catch (err) {
      const canTryApi = this.options.access !== "browser" && !this.useApi;
      if (
        canTryApi &&
        err instanceof GitHubHttpError &&
        err.status === 404 &&
        this.client.authorization()
      ) {
        this.useApi = true;
        return await this.follow(this.startUrl(), true, range);
      }
      throw err;
    }
  }

  private startUrl(): string {
    return this.useApi ? this.asset.url : this.asset.browserDownloadUrl;
  }

  private async follow(first: string, withToken: boolean, range: string | null): Promise<Response> {
    let url = first;
    let authorized = withToken;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const headers: Record<string, string> = { "user-agent": "reposync" };
      if (range) headers.range = range;
      const authorization = authorized ? this.client.authorization() : undefined;
      if (authorized) {
        headers.accept = "application/octet-stream";
        headers["x-github-api-version"] = GITHUB_API_VERSION;
      }
      if (authorization) headers.authorization = authorization;
      this.requests++;
      const response = await this.client.fetch(url, {
        headers,
        redirect: "manual",
        ...(this.options.signal ? { signal: this.options.signal } : {}),
        ...(range === null ? { timeoutMs: this.options.downloadTimeoutMs ?? 600_000 } : {}),
      });
      const location = response.headers.get("location");
      if (response.status >= 300 && response.status < 400 && location) {
        await response.body?.cancel();
        url = new URL(location, url).toString();
        // Whatever the next host is, it gets no token: the signed URL is its credential.
        authorized = false;
        this.resolved = url;
        continue;
      }
      if (response.status === 200 || response.status === 206) return response;
      const text = (await response.text().catch(() => "")).slice(0, 500);
      throw new GitHubHttpError(
        url.replace(/\?.*$/, ""),
        response.status,
        headerRecord(response.headers),
        `GET ${this.asset.name}: HTTP ${response.status} ${text}`.trim(),
      );
    }
    throw new ReposyncError(
      "GITHUB_HTTP",
      `${this.asset.name}: more than ${MAX_REDIRECTS} redirects`,
    );
  }
}
