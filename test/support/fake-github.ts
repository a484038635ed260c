import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real HTTP server on 127.0.0.1 standing in for GitHub, shaped like GitHub Enterprise: the API
 * under `/api/v3`, browser downloads beside it, and a second server as the CDN that assets
 * redirect to. It does what nock cannot: cross-origin redirects, byte ranges, real sockets.
 */

export interface FakeAssetInput {
  readonly id?: number;
  readonly name: string;
  readonly content: Uint8Array;
  /** Omitted: GitHub's `sha256:<hex>`; null: no digest (assets uploaded before June 2025). */
  readonly digest?: string | null;
  readonly state?: "uploaded" | "open";
  readonly updatedAt?: string;
}

/** A re-upload of an asset, for FakeGitHub.replaceAsset. */
export interface FakeAssetReplacement {
  /** Omitted: a new id, as GitHub gives a re-uploaded asset; the old id: new bytes under it. */
  readonly id?: number;
  /** Omitted: the old name. */
  readonly name?: string;
  readonly content: Uint8Array;
  /** Omitted: GitHub's `sha256:<hex>` of the new content; null: no digest. */
  readonly digest?: string | null;
  readonly state?: "uploaded" | "open";
  /** Omitted: one second after the old asset's. */
  readonly updatedAt?: string;
}

export interface FakeReleaseInput {
  readonly id?: number;
  readonly tag: string;
  readonly draft?: boolean;
  readonly prerelease?: boolean;
  readonly assets?: readonly FakeAssetInput[];
}

export interface FakeRepoInput {
  readonly owner: string;
  readonly repo: string;
  readonly private?: boolean;
  readonly releases?: readonly FakeReleaseInput[];
}

/** One answer to inject instead of the real one. */
export interface FakeFault {
  /** Which server and kind of request it hits. */
  readonly target: "api" | "browser" | "cdn";
  /** Hit the nth matching request from now (1 = the next one). */
  readonly nth?: number;
  /** Only requests whose path (without query) matches. */
  readonly path?: RegExp;
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
  /** Never answer (the socket stays open until the client gives up or the fake closes). */
  readonly hang?: boolean;
}

/** The primary rate limit the fake reports; `null` sends no rate-limit headers at all. */
export interface FakeRateLimit {
  limit: number;
  remaining: number;
  /** Epoch seconds. */
  reset: number;
  resource?: string;
}

interface Asset {
  id: number;
  name: string;
  content: Uint8Array;
  digest: string | null;
  state: string;
  updatedAt: string;
  downloadCount: number;
}

interface Release {
  id: number;
  tag: string;
  draft: boolean;
  prerelease: boolean;
  assets: Asset[];
}

interface Repo {
  id: number;
  owner: string;
  repo: string;
  private: boolean;
  releases: Release[];
}

/** One request as the fake saw it. */
export interface SeenRequest {
  readonly server: "api" | "cdn";
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly range: string | undefined;
  readonly status: number;
  /** When it was answered (Date.now()), to tell apart requests over time. */
  readonly at: number;
}

/** A CDN request for an asset that the fake holds unanswered (see FakeGitHub.holdCdn). */
export interface HeldCdnRequest {
  readonly assetId: number;
  /** Its Range header; undefined for a whole-file download. */
  readonly range: string | undefined;
  /** Answers it as the fake would have at once; nothing is written if the client left. */
  release(): void;
}

/** What the fake counted. */
export interface FakeCounters {
  /** API requests by path (no query), 304s included. */
  readonly api: Map<string, number>;
  /** Browser download URL requests (GitHub's web host, not the API). */
  browser: number;
  cdnRequests: number;
  /** Body bytes the CDN wrote. */
  cdnBytes: number;
  /** CDN answers with the whole file (200). */
  downloads: number;
  /** CDN requests refused for carrying Authorization. */
  cdnAuthRejected: number;
}

const SECONDARY_MESSAGE =
  "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.";

/** A 403 secondary-rate-limit fault, as GitHub sends it. */
export function secondaryRateLimitFault(retryAfterSeconds: number, nth = 1): FakeFault {
  return {
    target: "api",
    nth,
    status: 403,
    headers: { "retry-after": String(retryAfterSeconds) },
    body: { message: SECONDARY_MESSAGE, documentation_url: "https://docs.github.test/rate-limits" },
  };
}

export class FakeGitHub {
  /** The API base URL (GHES style: `.../api/v3`). */
  readonly apiUrl: string;
  readonly webUrl: string;
  readonly cdnUrl: string;
  /** The token the fake accepts; it has push access (sees drafts) and reads private repos. */
  readonly token: string;
  /** Set to make the CDN ignore Range and answer 200 with the whole file. */
  cdnIgnoresRange = false;
  /** null: no rate-limit headers (some GHES). */
  rateLimit: FakeRateLimit | null = null;
  readonly counters: FakeCounters = {
    api: new Map(),
    browser: 0,
    cdnRequests: 0,
    cdnBytes: 0,
    downloads: 0,
    cdnAuthRejected: 0,
  };
  readonly seen: SeenRequest[] = [];
  /**
   * Which valid CDN asset requests to hold unanswered (the socket stays open) until the test
   * releases them: the explicit signal for tests that need a download or a header read to be in
   * flight. Held requests appear in `heldCdn`; undefined holds none.
   */
  holdCdn: ((request: { assetId: number; range: string | undefined }) => boolean) | undefined;
  /** CDN requests held now, oldest first. */
  readonly heldCdn: HeldCdnRequest[] = [];

  private readonly repos: Repo[] = [];
  private faults: { fault: FakeFault; left: number }[] = [];
  private readonly signatures = new Map<string, number>();
  private nextId = 1000;

  private constructor(
    private readonly api: Server,
    private readonly cdn: Server,
    token: string,
  ) {
    this.token = token;
    this.webUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    this.apiUrl = `${this.webUrl}/api/v3`;
    this.cdnUrl = `http://127.0.0.1:${(cdn.address() as AddressInfo).port}`;
  }

  /** Starts both servers on ephemeral loopback ports. */
  static async start(options: { token?: string } = {}): Promise<FakeGitHub> {
    let fake: FakeGitHub | undefined;
    const api = createServer((req, res) => fake?.handleApi(req, res));
    const cdn = createServer((req, res) => fake?.handleCdn(req, res));
    await Promise.all([listen(api), listen(cdn)]);
    fake = new FakeGitHub(api, cdn, options.token ?? `ghp_${randomBytes(8).toString("hex")}`);
    return fake;
  }

  async close(): Promise<void> {
    for (const server of [this.api, this.cdn]) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  addRepo(input: FakeRepoInput): void {
    this.repos.push({
      id: this.nextId++,
      owner: input.owner,
      repo: input.repo,
      private: input.private ?? false,
      releases: [],
    });
    for (const release of input.releases ?? []) this.addRelease(input.owner, input.repo, release);
  }

  /** Adds a release; returns its id and its assets' ids in order. */
  addRelease(
    owner: string,
    repo: string,
    input: FakeReleaseInput,
  ): { id: number; assetIds: number[] } {
    const r = this.repo(owner, repo);
    const release: Release = {
      id: input.id ?? this.nextId++,
      tag: input.tag,
      draft: input.draft ?? false,
      prerelease: input.prerelease ?? false,
      assets: (input.assets ?? []).map((a) =>
        this.newAsset(a.id ?? this.nextId++, a, a.updatedAt ?? "2025-07-01T12:00:00Z"),
      ),
    };
    r.releases.push(release);
    return { id: release.id, assetIds: release.assets.map((a) => a.id) };
  }

  /**
   * Deletes an asset from its release, as someone removing it on GitHub would: the listing drops
   * it (so its pages' ETags change), its API URL answers 404 and the CDN no longer serves it.
   */
  removeAsset(owner: string, repo: string, assetId: number): void {
    const { release, index } = this.assetAt(owner, repo, assetId);
    release.assets.splice(index, 1);
  }

  /**
   * Re-uploads an asset in its place in the release: new bytes, so a new size, digest and
   * updated_at, and download_count back to 0; under a new id unless `input.id` keeps the old one.
   * The listing shows the new asset (so its pages' ETags change) and the CDN serves the new bytes.
   * Returns the asset's id.
   */
  replaceAsset(owner: string, repo: string, assetId: number, input: FakeAssetReplacement): number {
    const { release, index } = this.assetAt(owner, repo, assetId);
    const old = release.assets[index]!;
    const id = input.id ?? this.nextId++;
    const taken = this.repos.some((x) => x.releases.some((r) => r.assets.some((a) => a.id === id)));
    if (id !== assetId && taken) throw new Error(`fake GitHub: asset id ${id} is taken`);
    const updatedAt =
      input.updatedAt ??
      new Date(Date.parse(old.updatedAt) + 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
    release.assets[index] = this.newAsset(
      id,
      { ...input, name: input.name ?? old.name },
      updatedAt,
    );
    return id;
  }

  /** Makes every asset's download_count move, as real downloads do (the ETags change). */
  bumpDownloadCounts(): void {
    for (const repo of this.repos) {
      for (const release of repo.releases)
        for (const asset of release.assets) asset.downloadCount += 7;
    }
  }

  /** Queues a one-shot fault. */
  fault(fault: FakeFault): void {
    this.faults.push({ fault, left: fault.nth ?? 1 });
  }

  /** Releases every held CDN request; returns how many there were. */
  releaseHeldCdn(): number {
    const held = this.heldCdn.splice(0);
    for (const h of held) h.release();
    return held.length;
  }

  /** API requests made to `path` (no query). */
  apiRequests(path: string): number {
    return this.counters.api.get(path) ?? 0;
  }

  private repo(owner: string, repo: string): Repo {
    const r = this.repos.find((x) => x.owner === owner && x.repo === repo);
    if (!r) throw new Error(`fake GitHub: no repo ${owner}/${repo}`);
    return r;
  }

  /** Where an asset of `owner/repo` sits: its release and its index there. */
  private assetAt(
    owner: string,
    repo: string,
    assetId: number,
  ): { release: Release; index: number } {
    for (const release of this.repo(owner, repo).releases) {
      const index = release.assets.findIndex((a) => a.id === assetId);
      if (index >= 0) return { release, index };
    }
    throw new Error(`fake GitHub: no asset ${assetId} in ${owner}/${repo}`);
  }

  private newAsset(
    id: number,
    input: Omit<FakeAssetInput, "id" | "updatedAt">,
    updatedAt: string,
  ): Asset {
    return {
      id,
      name: input.name,
      content: input.content,
      digest:
        input.digest === undefined
          ? `sha256:${createHash("sha256").update(input.content).digest("hex")}`
          : input.digest,
      state: input.state ?? "uploaded",
      updatedAt,
      downloadCount: 0,
    };
  }

  private takeFault(target: FakeFault["target"], path: string): FakeFault | undefined {
    for (const entry of this.faults) {
      if (entry.fault.target !== target || (entry.fault.path && !entry.fault.path.test(path)))
        continue;
      entry.left--;
      if (entry.left === 0) {
        this.faults = this.faults.filter((e) => e !== entry);
        return entry.fault;
      }
    }
    return undefined;
  }

  private authorized(req: IncomingMessage): boolean | "bad" {
    const header = req.headers.authorization;
    if (header === undefined) return false;
    const match = /^(?:token|bearer)\s+(.+)$/i.exec(header);
    return match?.[1] === this.token ? true : "bad";
  }

  private rateLimitHeaders(): Record<string, string> {
    const rl = this.rateLimit;
    if (!rl) return {};
    const now = Math.floor(Date.now() / 1000);
    if (now >= rl.reset) {
      rl.remaining = rl.limit;
      rl.reset = now + 3600;
    }
    return {
      "x-ratelimit-limit": String(rl.limit),
      "x-ratelimit-remaining": String(rl.remaining),
      "x-ratelimit-used": String(rl.limit - rl.remaining),
      "x-ratelimit-reset": String(rl.reset),
      "x-ratelimit-resource": rl.resource ?? "core",
    };
  }

  private handleApi(req: IncomingMessage, res: ServerResponse): undefined {
    const url = new URL(req.url ?? "/", this.webUrl);
    const path = url.pathname;
    const send = (status: number, headers: Record<string, string>, body?: unknown): undefined => {
      this.seen.push({
        server: "api",
        method: req.method ?? "",
        path: `${path}${url.search}`,
        authorization: req.headers.authorization,
        range: req.headers.range,
        status,
        at: Date.now(),
      });
      const text = body === undefined ? "" : typeof body === "string" ? body : JSON.stringify(body);
      const type =
        typeof body === "object" ? { "content-type": "application/json; charset=utf-8" } : {};
      res.writeHead(status, { ...type, ...headers });
      res.end(text);
    };

    if (!path.startsWith("/api/v3/")) return this.handleBrowser(req, res, url, send);
    this.counters.api.set(path, (this.counters.api.get(path) ?? 0) + 1);
    const fault = this.takeFault("api", path);
    if (fault?.hang) return;
    if (fault)
      return send(fault.status, { ...this.rateLimitHeaders(), ...fault.headers }, fault.body);

    const auth = this.authorized(req);
    if (auth === "bad") return send(401, {}, { message: "Bad credentials" });
    const rl = this.rateLimit;
    const limitHeaders = this.rateLimitHeaders();
    if (rl && rl.remaining <= 0) {
      return send(403, limitHeaders, { message: "API rate limit exceeded for 127.0.0.1." });
    }
    const spend = () => {
      if (rl) rl.remaining--;
      return this.rateLimitHeaders();
    };

    const api = path.slice("/api/v3".length);
    let m = /^\/repos\/([^/]+)\/([^/]+)\/releases$/.exec(api);
    const byId = /^\/repositories\/(\d+)\/releases$/.exec(api);
    if (m || byId) {
      const repo = byId
        ? this.repos.find((r) => r.id === Number(byId[1]))
        : this.repos.find((r) => r.owner === m?.[1] && r.repo === m?.[2]);
      if (!repo || (repo.private && auth !== true))
        return send(404, spend(), { message: "Not Found" });
      return this.listReleases(repo, url, auth === true, req, send, spend);
    }
    m = /^\/repos\/([^/]+)\/([^/]+)\/releases\/assets\/(\d+)$/.exec(api);
    if (m) {
      const repo = this.repos.find((r) => r.owner === m?.[1] && r.repo === m?.[2]);
      const asset = repo?.releases.flatMap((r) => r.assets).find((a) => a.id === Number(m?.[3]));
      if (!repo || !asset || (repo.private && auth !== true)) {
        return send(404, spend(), { message: "Not Found" });
      }
      if (req.headers.accept === "application/octet-stream") {
        return send(302, { ...spend(), location: this.signedCdnUrl(asset) });
      }
      return send(200, spend(), this.assetJson(repo, this.releaseOf(repo, asset), asset));
    }
    return send(404, spend(), { message: "Not Found" });
  }

  private listReleases(
    repo: Repo,
    url: URL,
    pushAccess: boolean,
    req: IncomingMessage,
    send: (status: number, headers: Record<string, string>, body?: unknown) => undefined,
    spend: () => Record<string, string>,
  ): undefined {
    const perPage = Math.min(
      100,
      Math.max(1, Number(url.searchParams.get("per_page") ?? 30) || 30),
    );
    const page = Math.max(1, Number(url.searchParams.get("page") ?? 1) || 1);
    const visible = repo.releases.filter((r) => pushAccess || !r.draft).sort((a, b) => b.id - a.id);
    const body = visible
      .slice((page - 1) * perPage, page * perPage)
      .map((r) => this.releaseJson(repo, r));
    const text = JSON.stringify(body);
    // Derived from the page's body, as GitHub's is: whatever changes a listed field (a release
    // added, an asset removed or replaced, a download counted) changes it, with no bookkeeping.
    const etag = `W/"${createHash("sha1").update(text).digest("hex")}"`;
    if (req.headers["if-none-match"] === etag) {
      // A conditional hit with Authorization costs no primary budget (and sends no Link).
      return send(304, { ...(pushAccess ? this.rateLimitHeaders() : spend()), etag });
    }
    const last = Math.max(1, Math.ceil(visible.length / perPage));
    const link = (p: number) =>
      `${this.apiUrl}/repositories/${repo.id}/releases?per_page=${perPage}&page=${p}`;
    const rels: string[] = [];
    if (page < last) rels.push(`<${link(page + 1)}>; rel="next"`, `<${link(last)}>; rel="last"`);
    if (page > 1) rels.push(`<${link(page - 1)}>; rel="prev"`, `<${link(1)}>; rel="first"`);
    send(200, { ...spend(), etag, ...(rels.length ? { link: rels.join(", ") } : {}) }, body);
  }

  private releaseOf(repo: Repo, asset: Asset): Release {
    return repo.releases.find((r) => r.assets.includes(asset))!;
  }

  private releaseJson(repo: Repo, r: Release) {
    return {
      id: r.id,
      tag_name: r.tag,
      name: r.tag,
      draft: r.draft,
      prerelease: r.prerelease,
      created_at: "2025-07-01T12:00:00Z",
      published_at: r.draft ? null : "2025-07-01T12:00:00Z",
      assets: r.assets.map((a) => this.assetJson(repo, r, a)),
    };
  }

  private assetJson(repo: Repo, r: Release, a: Asset) {
    return {
      id: a.id,
      name: a.name,
      label: null,
      state: a.state,
      content_type: "application/x-rpm",
      size: a.content.length,
      digest: a.digest,
      download_count: a.downloadCount,
      created_at: "2025-07-01T12:00:00Z",
      updated_at: a.updatedAt,
      url: `${this.apiUrl}/repos/${repo.owner}/${repo.repo}/releases/assets/${a.id}`,
      browser_download_url: `${this.webUrl}/${repo.owner}/${repo.repo}/releases/download/${encodeURIComponent(r.tag)}/${encodeURIComponent(a.name)}`,
    };
  }

  private signedCdnUrl(asset: Asset): string {
    const sig = randomBytes(12).toString("hex");
    this.signatures.set(sig, asset.id);
    return `${this.cdnUrl}/assets/${asset.id}?sig=${sig}`;
  }

  private handleBrowser(
    req: IncomingMessage,
    _res: ServerResponse,
    url: URL,
    send: (status: number, headers: Record<string, string>, body?: unknown) => undefined,
  ): undefined {
    this.counters.browser++;
    const fault = this.takeFault("browser", url.pathname);
    if (fault?.hang) return;
    if (fault) return send(fault.status, { ...fault.headers }, fault.body);
    const m = /^\/([^/]+)\/([^/]+)\/releases\/download\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    const repo = m && this.repos.find((r) => r.owner === m[1] && r.repo === m[2]);
    const release = repo?.releases.find((r) => r.tag === decodeURIComponent(m?.[3] ?? ""));
    const asset = release?.assets.find((a) => a.name === decodeURIComponent(m?.[4] ?? ""));
    // Private repos' download URLs are 404 to anonymous and API clients alike.
    if (!repo || !asset || repo.private || req.method !== "GET") return send(404, {}, "Not Found");
    send(302, { location: this.signedCdnUrl(asset) });
  }

  private handleCdn(req: IncomingMessage, res: ServerResponse): undefined {
    const url = new URL(req.url ?? "/", this.cdnUrl);
    this.counters.cdnRequests++;
    let status = 0;
    res.on("finish", () =>
      this.seen.push({
        server: "cdn",
        method: req.method ?? "",
        path: url.pathname,
        authorization: req.headers.authorization,
        range: req.headers.range,
        status,
        at: Date.now(),
      }),
    );
    const plain = (code: number, text: string, headers: Record<string, string> = {}): undefined => {
      status = code;
      res.writeHead(code, { "content-type": "text/plain", ...headers });
      res.end(text);
    };
    const fault = this.takeFault("cdn", url.pathname);
    if (fault?.hang) return;
    if (fault) {
      return plain(fault.status, JSON.stringify(fault.body ?? ""), { ...fault.headers });
    }
    if (req.headers.authorization !== undefined) {
      this.counters.cdnAuthRejected++;
      return plain(400, "Only one auth mechanism allowed");
    }
    const id = this.signatures.get(url.searchParams.get("sig") ?? "");
    const m = /^\/assets\/(\d+)$/.exec(url.pathname);
    if (!m || id === undefined || id !== Number(m[1])) return plain(403, "Request has expired");
    const asset = this.repos
      .flatMap((r) => r.releases)
      .flatMap((r) => r.assets)
      .find((a) => a.id === id);
    if (!asset) return plain(404, "NoSuchKey");
    const hold = { assetId: asset.id, range: req.headers.range };
    if (this.holdCdn?.(hold)) {
      const held: HeldCdnRequest = {
        ...hold,
        release: () => {
          const i = this.heldCdn.indexOf(held);
          if (i >= 0) this.heldCdn.splice(i, 1);
          if (!res.destroyed) this.answerAsset(req, res, asset, (code) => (status = code), plain);
        },
      };
      this.heldCdn.push(held);
      return;
    }
    return this.answerAsset(req, res, asset, (code) => (status = code), plain);
  }

  /** The CDN's answer for an asset: the whole file, a range of it, or 416. */
  private answerAsset(
    req: IncomingMessage,
    res: ServerResponse,
    asset: Asset,
    setStatus: (code: number) => void,
    plain: (code: number, text: string, headers?: Record<string, string>) => undefined,
  ): undefined {
    const size = asset.content.length;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (!range || this.cdnIgnoresRange) {
      setStatus(200);
      this.counters.downloads++;
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": String(size),
        "accept-ranges": "bytes",
      });
      return this.stream(res, asset.content);
    }
    const start = Number(range[1]);
    const end = Math.min(size - 1, range[2] === "" ? size - 1 : Number(range[2]));
    if (start >= size || end < start) {
      return plain(416, "InvalidRange", { "content-range": `bytes */${size}` });
    }
    setStatus(206);
    res.writeHead(206, {
      "content-type": "application/octet-stream",
      "content-length": String(end - start + 1),
      "content-range": `bytes ${start}-${end}/${size}`,
    });
    this.stream(res, asset.content.subarray(start, end + 1));
  }

  /** Writes in chunks, honouring backpressure, stopping when the client goes away. */
  private stream(res: ServerResponse, bytes: Uint8Array): undefined {
    let offset = 0;
    const chunk = 16 * 1024;
    const pump = () => {
      while (offset < bytes.length && !res.destroyed) {
        const part = bytes.subarray(offset, offset + chunk);
        offset += part.length;
        this.counters.cdnBytes += part.length;
        if (!res.write(part)) {
          res.once("drain", pump);
          return;
        }
      }
      if (!res.destroyed) res.end();
    };
    pump();
  }
}

function listen(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
}
