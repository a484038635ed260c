-- How the sync job reached each package's asset: 'browser' (its public URL) or 'api' (the API
-- URL with the token: a private repository). The server hands a redirect-mode client the right
-- address from it, and a cache-mode download goes straight to the route that works.
alter table packages add column access text not null default 'browser';
