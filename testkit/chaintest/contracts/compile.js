// Compiles TestToken.sol with the pinned solc and writes its runtime
// bytecode (TestToken.bin, hex) and ABI (TestToken.abi.json), or, with
// --check, fails when the committed files differ from what it makes.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const dir = __dirname;
const input = {
  language: "Solidity",
  sources: { "TestToken.sol": { content: fs.readFileSync(path.join(dir, "TestToken.sol"), "utf8") } },
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    metadata: { bytecodeHash: "none" },
    outputSelection: { "*": { TestToken: ["abi", "evm.deployedBytecode.object"] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const c = out.contracts["TestToken.sol"].TestToken;
const files = {
  "TestToken.bin": c.evm.deployedBytecode.object + "\n",
  "TestToken.abi.json": JSON.stringify(c.abi, null, 2) + "\n",
};
const check = process.argv.includes("--check");
let stale = false;
for (const [name, content] of Object.entries(files)) {
  const file = path.join(dir, name);
  if (check) {
    const have = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
    if (have !== content) {
      console.error(`${name} is not what solc ${solc.version()} makes of TestToken.sol: run make contracts`);
      stale = true;
    }
  } else {
    fs.writeFileSync(file, content);
  }
}
if (stale) process.exit(1);
console.log(check ? `contracts: TestToken.bin and its ABI are what solc ${solc.version()} makes` : `contracts: compiled with solc ${solc.version()}`);
