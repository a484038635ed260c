import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeGitHub } from "./fake-github.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const before = Buffer.from("the first upload");
const after = Buffer.from("the second upload, longer");

interface ListedAsset {
  id: number;
  name: string;
  size: number;
  digest: string | null;
  updated_at: string;
  download_count: number;
  browser_download_url: string;
}

let gh: FakeGitHub;
let repoCounter = 0;
beforeAll(async () => {
  gh = await FakeGitHub.start();
});
afterAll(async () => {
  await gh.close();
});

/** A fresh repo with one release of one asset. */
function newRepo() {
  const repo = `assets${++repoCounter}`;
  gh.addRepo({ owner: "acme", repo });
  const { assetIds } = gh.addRelease("acme", repo, {
    tag: "v1",
    assets: [{ name: "tool.rpm", content: before, updatedAt: "2025-07-01T12:00:00Z" }],
  });
  return { owner: "acme", repo, id: assetIds[0] ?? 0 };
}

/** The releases listing, conditional on `etag` when given. */
async function list(repo: string, etag?: string) {
  const res = await fetch(`${gh.apiUrl}/repos/acme/${repo}/releases`, {
    headers: { authorization: `token ${gh.token}`, ...(etag ? { "if-none-match": etag } : {}) },
  });
  const assets =
    res.status === 200
      ? ((await res.json()) as { assets: ListedAsset[] }[]).flatMap((r) => r.assets)
      : [];
  return { status: res.status, etag: res.headers.get("etag") ?? "", assets };
}

const assetApi = (repo: string, id: number) =>
  fetch(`${gh.apiUrl}/repos/acme/${repo}/releases/assets/${id}`, {
    headers: { authorization: `token ${gh.token}` },
  });

describe("the fake GitHub's asset changes", () => {
  it("removes an asset: the listing drops it under a new ETag, and its URL is 404", async () => {
    const { owner, repo, id } = newRepo();
    const first = await list(repo);
    expect(first.assets.map((a) => a.id)).toEqual([id]);

    gh.removeAsset(owner, repo, id);
    const second = await list(repo, first.etag);
    expect(second.status).toBe(200);
    expect(second.etag).not.toBe(first.etag);
    expect(second.assets).toEqual([]);
    expect((await assetApi(repo, id)).status).toBe(404);
    expect(() => gh.removeAsset(owner, repo, id)).toThrow(/no asset/);
  });

  it("replaces an asset under a new id by default, as GitHub does a re-upload", async () => {
    const { owner, repo, id } = newRepo();
    const first = await list(repo);

    const newId = gh.replaceAsset(owner, repo, id, { content: after });
    expect(newId).not.toBe(id);
    const second = await list(repo, first.etag);
    expect(second.status).toBe(200);
    expect(second.etag).not.toBe(first.etag);
    expect(second.assets).toMatchObject([
      {
        id: newId,
        name: "tool.rpm",
        size: after.length,
        digest: `sha256:${sha256(after)}`,
        updated_at: "2025-07-01T12:00:01Z",
        download_count: 0,
      },
    ]);
    expect((await assetApi(repo, id)).status).toBe(404);
    const download = await fetch(second.assets[0]?.browser_download_url ?? "");
    expect(Buffer.from(await download.arrayBuffer())).toEqual(after);
  });

  it("replaces the bytes under the same id when told to keep it", async () => {
    const { owner, repo, id } = newRepo();
    gh.bumpDownloadCounts();
    const first = await list(repo);

    const updatedAt = "2025-08-02T08:30:00Z";
    expect(gh.replaceAsset(owner, repo, id, { id, content: after, updatedAt })).toBe(id);
    const second = await list(repo, first.etag);
    expect(second.status).toBe(200);
    expect(second.etag).not.toBe(first.etag);
    expect(second.assets).toMatchObject([
      { id, size: after.length, digest: `sha256:${sha256(after)}`, updated_at: updatedAt },
    ]);
    expect((await list(repo, second.etag)).status).toBe(304);
    const download = await fetch(`${gh.apiUrl}/repos/acme/${repo}/releases/assets/${id}`, {
      headers: { authorization: `token ${gh.token}`, accept: "application/octet-stream" },
    });
    expect(Buffer.from(await download.arrayBuffer())).toEqual(after);
  });

  it("refuses an asset it does not hold, and an id another asset has", () => {
    const { owner, repo, id } = newRepo();
    const { assetIds } = gh.addRelease(owner, repo, {
      tag: "v2",
      assets: [{ name: "other.rpm", content: before }],
    });
    expect(() => gh.replaceAsset(owner, repo, id + 10_000, { content: after })).toThrow(/no asset/);
    expect(() => gh.replaceAsset(owner, repo, id, { id: assetIds[0], content: after })).toThrow(
      /is taken/,
    );
  });
});
