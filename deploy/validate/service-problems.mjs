// The problems check-services.mjs reports, as "ORIGIN: MESSAGE" lines;
// every check adds to them.
// Part of check-services.mjs.

export const problems = [];
export const problem = (origin, message) => problems.push(`${origin}: ${message}`);
