// Kotlin: a check() failure wrapped with a cause; top-level functions appear as AgentKt.
package com.acme.agent

class ToolFailure(message: String, cause: Throwable) : RuntimeException(message, cause)

fun lookupCustomer(customerId: String): String {
    val cache = mapOf("cus_1001" to "alice")
    return cache[customerId] ?: error("customer $customerId missing from cache (E6120)")
}

fun runTool(callId: String) {
    try {
        lookupCustomer("cus_9f2e71")
    } catch (e: IllegalStateException) {
        throw ToolFailure("tool lookup_customer failed for call $callId token=${System.getenv("GH_TOKEN")}", e)
    }
}

fun main() {
    runTool("call_5b2d90")
}
