// Starts reading the profile the page embeds, before the renderer's and the
// page's scripts are compiled, so that the two overlap. The profile is JSON
// deflated with zlib and in base64 (lib/sonde/flamegraph.rb); inflating it
// takes the browser's DecompressionStream, which every current browser has.
// Leaves window.sondeProfileText: a promise of the JSON text (page.js
// parses it and says what went wrong if it failed).
(function () {
  "use strict";

  function inflate(base64) {
    var binary = atob(base64);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    var inflated = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(inflated).text();
  }

  performance.mark("sonde-inflate-start");
  if (typeof DecompressionStream === "undefined") {
    window.sondeProfileText = Promise.reject(new Error(
      "this page needs a browser with DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 or later)"));
  } else {
    try {
      window.sondeProfileText = inflate(document.getElementById("sonde-data").textContent);
    } catch (error) {
      window.sondeProfileText = Promise.reject(error);
    }
  }
})();
