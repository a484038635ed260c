import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";

describe("the settings the replica tests turn", () => {
  it("reads REPOSYNC_FETCH_LEASES as on (the default) or off, and refuses anything else by name", () => {
    expect(loadConfig({ env: {} }).fetchLeases).toBe(true);
    expect(loadConfig({ env: { REPOSYNC_FETCH_LEASES: "off" } }).fetchLeases).toBe(false);
    expect(loadConfig({ env: { REPOSYNC_FETCH_LEASES: " ON " } }).fetchLeases).toBe(true);
    expect(() => loadConfig({ env: { REPOSYNC_FETCH_LEASES: "no" } })).toThrow(
      /REPOSYNC_FETCH_LEASES="no": expected on or off/,
    );
  });

  it("reads REPOSYNC_SYNC_LEASE as a duration of at least 1s, 2m by default", () => {
    expect(loadConfig({ env: {} }).syncLease).toBe(120_000);
    expect(loadConfig({ env: { REPOSYNC_SYNC_LEASE: "3s" } }).syncLease).toBe(3_000);
    expect(() => loadConfig({ env: { REPOSYNC_SYNC_LEASE: "500ms" } })).toThrow(
      /REPOSYNC_SYNC_LEASE="500ms": expected at least 1s/,
    );
    expect(() => loadConfig({ env: { REPOSYNC_SYNC_LEASE: "3" } })).toThrow(/REPOSYNC_SYNC_LEASE/);
  });
});
