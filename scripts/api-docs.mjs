#!/usr/bin/env node
// The per-call API reference: TypeDoc over the package's entry points (typedoc.json) into
// docs/api/ as Markdown, and docs/api/c-names.md, which lists every librdmacm / libibverbs /
// rsocket call the doc comments name beside the calls here that name it.
//
//   node scripts/api-docs.mjs           write docs/api/ (npm run docs)
//   node scripts/api-docs.mjs --check   write nothing; exit 1, listing them, when an exported
//                                       symbol has no documentation or a comment's link is broken
import * as td from 'typedoc';
import { MarkdownRendererEvent } from 'typedoc-plugin-markdown';
import { writeFileSync } from 'node:fs';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');

/** The C calls a comment may name: librdmacm's, libibverbs', the rsocket calls and rdma_verbs.h's. */
const C_NAME = /\b(rdma_[a-z0-9_]+|ibv_[a-z0-9_]+|r(?:socket|bind|listen|accept|connect|shutdown|close|recv|recvfrom|recvmsg|send|sendto|sendmsg|read|readv|write|writev|poll|select|getpeername|getsockname|setsockopt|getsockopt|fcntl|iomap|iounmap|iowrite))\(/g;

/** The C names in the summary of a reflection's comment (its own or its first signature's). */
function cNamesOf(refl) {
  const comment = refl.comment ?? refl.signatures?.[0]?.comment ?? refl.getSignature?.comment;
  if (!comment) return [];
  const text = comment.summary.map((p) => p.text).join('');
  return [...new Set([...text.matchAll(C_NAME)].map((m) => m[1]))];
}

const app = await td.Application.bootstrapWithPlugins(
  { options: join(ROOT, 'typedoc.json'), treatValidationWarningsAsErrors: check },
  [new td.TypeDocReader(), new td.TSConfigReader()],
);
// Members named with a leading underscore are the package's own seams (the providers' side of a
// QP, the CM's of a channel): not for users, so not in their reference.
app.converter.on(td.Converter.EVENT_RESOLVE_BEGIN, (context) => {
  const members = td.ReflectionKind.Method | td.ReflectionKind.Property | td.ReflectionKind.Accessor;
  for (const refl of context.project.getReflectionsByKind(members)) if (refl.name.startsWith('_')) context.project.removeReflection(refl);
});
const project = await app.convert();
if (!project) process.exit(1);
app.validate(project);
if (check) {
  if (app.logger.hasErrors() || app.logger.hasWarnings()) process.exit(1);
  console.log('api-docs: every exported symbol is documented');
  process.exit(0);
}

// Calls (functions, methods, accessors) by the C names their comments give, with their pages.
const KINDS = td.ReflectionKind.Function | td.ReflectionKind.Method | td.ReflectionKind.Accessor | td.ReflectionKind.Class;
const byName = new Map();
app.renderer.on(MarkdownRendererEvent.BEGIN, () => {
  const router = app.renderer.router;
  for (const refl of project.getReflectionsByKind(KINDS)) {
    for (const c of cNamesOf(refl)) {
      const here = refl.getFriendlyFullName().replace(/^index\./, '');
      const url = router.hasUrl(refl) ? router.getFullUrl(refl) : router.getFullUrl(refl.parent);
      if (!byName.has(c)) byName.set(c, []);
      byName.get(c).push(`[${here}](${url})`);
    }
  }
});
await app.generateOutputs(project);
if (app.logger.hasErrors()) process.exit(1);

const rows = [...byName.keys()].sort().map((c) => `| \`${c}\` | ${[...new Set(byName.get(c))].join(', ')} |`);
writeFileSync(
  join(ROOT, 'docs', 'api', 'c-names.md'),
  `# The C calls and their counterparts here\n\nEvery librdmacm, libibverbs and rsocket call that a doc comment of this package names, beside\nthe calls that name it (entry points: \`rdmacm\`, \`rdmacm/verbs\`, \`rdmacm/cm\`, \`rdmacm/rsocket\`, \`rdmacm/wire\`;\nthe full reference: [README.md](README.md)).\n\n| C | here |\n| --- | --- |\n${rows.join('\n')}\n`,
);
console.log(`api-docs: docs/api/ written (${byName.size} C calls indexed in docs/api/c-names.md)`);
