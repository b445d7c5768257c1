// $BROWSER for the conformance run: GETs the authorization URL and follows the redirects, as
// a browser does when the authorization server approves at once.
const response = await fetch(process.argv[2], { redirect: "follow" });
await response.text();
