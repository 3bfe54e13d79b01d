// k6's runtime gives scripts a console (k6's docs, "console"); @types/k6
// leaves it to the DOM's types, which k6 does not have.
declare const console: { log(...args: unknown[]): void };
